package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/internal/buildinfo"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Which source ocfw was built from: revision, Go and key module versions",
		Long: `version prints the VCS revision ocfw was built from, and whether that tree had
uncommitted changes, the Go version, and the versions of the modules that shape
an image (u-root, mkuimage, gobusybox, go-diskfs). Images record the same in their
manifest ("builder").

'go build' stamps the revision into the binary. Under 'go run' and 'go test' it
is not stamped; then it comes from git in the ocfw checkout the command runs in
(the tree 'ocfw build' compiles the firmware's userland from), and is "unknown"
without git or a checkout.`,
		Example: `  ocfw version
  ocfw version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := buildinfo.Get()
			if !asJSON {
				_, err := fmt.Fprint(cmd.OutOrStdout(), i)
				return err
			}
			b, err := json.MarshalIndent(i, "", "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
