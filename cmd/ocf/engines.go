package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/ocfw/ocfw/ocf/cryptodev"
	"github.com/ocfw/ocfw/ocf/kcrypto"
)

// devCrypto is the device `engines` lists the answering drivers of.
const devCrypto = "/dev/crypto"

// writeDevCrypto lists which kernel driver answers each cipher through
// /dev/crypto; nothing when the system has no such device.
func writeDevCrypto(w io.Writer, path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	d, err := cryptodev.Open(path, cryptodev.Auto)
	if err != nil {
		_, werr := fmt.Fprintf(w, "\n%s: %v\n", path, err)
		return werr
	}
	defer d.Close()
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	return cryptodev.WriteEngines(w, path, d)
}

// newEnginesCmd builds `engines`: the kernel crypto API's engine choice,
// shown and changed by hand.
func newEnginesCmd(f *rootFlags) *cobra.Command {
	var asJSON bool
	var ciphers []string
	hwEngines := func() ([]kcrypto.HWEngine, error) {
		p, err := f.loadPlan()
		if err != nil {
			return nil, err
		}
		return append(kcrypto.PlanEngines(p), kcrypto.CatalogEngines()...), nil
	}
	show := func(w io.Writer, v any, text func(io.Writer) error) error {
		if asJSON {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(v)
		}
		return text(w)
	}
	cmd := &cobra.Command{
		Use:   "engines",
		Short: "Show or change which engine the kernel uses for each cipher (IPsec, dm-crypt, AF_ALG users)",
		Long: `engines lists, per kernel algorithm name (cbc(aes) serves aes-128-cbc,
aes-192-cbc and aes-256-cbc), every implementation the kernel has registered with
its priority, module and whether it is hardware, and marks with "*" the one the
kernel hands a new user now (found by binding the name over AF_ALG, which builds
a template instance such as cbc(aes-generic) if none exists yet).

The kernel takes the highest priority. At boot the firmware puts every hardware
engine below software until its self-test proves it, then raises the engines that
passed in the order its measurements chose. To switch hardware crypto off by hand,
without a reboot:

  ocf engines demote cbc-aes-geode      # the kernel uses software for cbc(aes)
  ocf engines prefer cbc-aes-geode      # make it the kernel's choice again

DRIVER is an exact driver name from the list (not a generic name like cbc(aes)).
prefer also drops what the kernel built on the other implementations (e.g. the
authenc instances IPsec uses), so new users and new IPsec SAs follow at once;
running connections keep the engine they hold. Changes last until reboot. Needs
root and the crypto_user module (the firmware loads it).

Where /dev/crypto exists (cryptodev-linux, on x86 images with a hardware engine),
the text listing ends with the kernel driver that answers each cipher through it:
the same choice, since /dev/crypto asks the kernel by generic name.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			engines, err := hwEngines()
			if err != nil {
				return err
			}
			st, err := kcrypto.Status(engines, ciphers, true)
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), st, func(w io.Writer) error {
				if err := kcrypto.WriteStatus(w, st); err != nil {
					return err
				}
				return writeDevCrypto(w, devCrypto)
			})
		},
	}
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringArrayVar(&ciphers, "cipher", nil, "only the kernel name of this cipher (repeat)")
	// "ocf engines list" is what a new user typed first: the same listing.
	list := &cobra.Command{Use: "list", Short: "List the engines (the same as 'ocf engines')", Args: cobra.NoArgs, RunE: cmd.RunE}
	list.Flags().StringArrayVar(&ciphers, "cipher", nil, "only the kernel name of this cipher (repeat)")
	cmd.AddCommand(list)
	change := func(use, short, long string, do func(string, []kcrypto.HWEngine) (*kcrypto.Outcome, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " DRIVER",
			Short: short,
			Long:  long,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				engines, err := hwEngines()
				if err != nil {
					return err
				}
				o, err := do(args[0], engines)
				if o != nil {
					if perr := show(cmd.OutOrStdout(), o, func(w io.Writer) error { return kcrypto.WriteOutcome(w, o) }); perr != nil && err == nil {
						err = perr
					}
				}
				return err
			},
		}
	}
	cmd.AddCommand(
		change("prefer", "Make DRIVER the kernel's choice for its algorithm name",
			`prefer raises DRIVER's priority above every other implementation of its name and
drops the instances built on the others, then shows what the kernel resolves.`, kcrypto.Prefer),
		change("demote", "Put DRIVER below the kernel's software for its algorithm name",
			`demote lowers DRIVER's priority below every other implementation of its name (to 1),
making sure a software implementation is there to take over, then shows what the
kernel resolves.`, kcrypto.Demote),
	)
	return cmd
}
