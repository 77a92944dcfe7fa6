package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/site"
)

const placeholderFlag = "allow-placeholder-key"

func registerPlaceholderFlag(cmd *cobra.Command, f *buildFlags) {
	cmd.Flags().BoolVar(&f.allowPlaceholder, placeholderFlag, false, "build a site config whose only SSH key is the examples' placeholder (nobody can log in over SSH; the console still works)")
}

// checkPlaceholderKey refuses a site whose only authorized key is the
// examples' placeholder, unless allowed: such a router lets nobody in
// over SSH, which a new user finds out only at the login prompt.
func checkPlaceholderKey(file string, s *site.Site, allow bool) error {
	if !s.OnlyPlaceholderKey() || allow {
		return nil
	}
	return fmt.Errorf("--site %s: %s", file, placeholderKeyProblem())
}

// placeholderKeyProblem is the refusal's words, the same in build, try
// and validate: validate must not call ok what the build refuses.
func placeholderKeyProblem() string {
	return fmt.Sprintf("the only key under ssh.authorized_keys is the examples' placeholder (ssh-ed25519 ...%s), whose private half nobody has: "+
		"put your own public key there (the line in ~/.ssh/id_ed25519.pub), or give --%s to build it anyway (the console still works, SSH lets nobody in)",
		site.PlaceholderKey[len(site.PlaceholderKey)-12:], placeholderFlag)
}
