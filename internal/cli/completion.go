package cli

import (
	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/boards"
	"github.com/ocfw/ocfw/drivers/catalog"
)

// registerCompletions makes the shell complete --board, --card, --cipher
// and --require-hw with the names ocfw knows (the user's --profiles
// included, when given before the flag) instead of file names, wherever
// a command has those flags, and board show's NAME likewise.
func registerCompletions(root *cobra.Command, g *globalFlags) {
	loadCatalog := func() *boards.Catalog {
		if c, err := g.catalog(); err == nil {
			return c
		}
		c, _ := boards.Embedded() // a broken --profiles still completes the built-in names
		return c
	}
	names := func(list func(*boards.Catalog) []string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			c := loadCatalog()
			if c == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return list(c), cobra.ShellCompDirectiveNoFileComp
		}
	}
	ciphers := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return catalog.CipherNames(), cobra.ShellCompDirectiveNoFileComp
	}
	byFlag := map[string]cobra.CompletionFunc{
		"board":      names((*boards.Catalog).BoardNames),
		"card":       names((*boards.Catalog).CardNames),
		"cipher":     ciphers,
		"require-hw": ciphers,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, f := range byFlag {
			if c.LocalNonPersistentFlags().Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, f)
			}
		}
		if c.Name() == "show" && c.Parent() != nil && c.Parent().Name() == "board" {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				cat := loadCatalog()
				if cat == nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return append(cat.BoardNames(), cat.CardNames()...), cobra.ShellCompDirectiveNoFileComp
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	noteBashCompletion(root)
}

// bashCompletionNote is what a new user missed: bash loads the script
// only with bash-completion installed.
const bashCompletionNote = `bash needs Debian's bash-completion package for the script to work:
sudo apt-get install bash-completion, then open a new shell.`

// noteBashCompletion makes cobra's completion command now, so its help
// can say what bash needs.
func noteBashCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long += "\n" + bashCompletionNote + "\n"
		for _, sub := range c.Commands() {
			if sub.Name() == "bash" {
				sub.Long = bashCompletionNote + "\n\n" + sub.Long
			}
		}
	}
}
