package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// needArgs accepts between min and max arguments (max < 0: any number
// from min) and otherwise says what the command expects, with an
// example, instead of cobra's bare "accepts 1 arg(s), received 0".
func needArgs(min, max int, what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && (max < 0 || len(args) <= max) {
			return nil
		}
		got := "nothing"
		switch len(args) {
		case 0:
		case 1:
			got = "1 argument"
		default:
			got = fmt.Sprintf("%d arguments", len(args))
		}
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		return fmt.Errorf("%s needs %s, got %s; for example: %s", name, what, got, example)
	}
}
