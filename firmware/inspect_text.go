package firmware

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints what Inspect found for people: partitions and their
// file systems and files, flash partitions and FIS entries, the boot
// configuration, the manifest, the reports (latest first) and every
// problem.
func (info *Info) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "image:\t%s (%d bytes, %s)\n", info.Path, info.Size, info.Kind)
	if info.Signature != "" {
		fmt.Fprintf(tw, "disk signature:\t%s\n", info.Signature)
	}
	for _, p := range info.Partitions {
		boot := ""
		if p.Bootable {
			boot = ", bootable"
		}
		fmt.Fprintf(tw, "partition %d:\t%s at %d, %d bytes%s\n", p.Index, p.Type, p.Offset, p.Size, boot)
		if p.FS != nil {
			fmt.Fprintf(tw, "  file system:\t%s label %q serial %s, %d clusters of %d bytes, hidden sectors %d, geometry %d/%d\n",
				p.FS.Type, p.FS.Label, p.FS.Serial, p.FS.Clusters, p.FS.ClusterBytes, p.FS.HiddenSectors, p.FS.Heads, p.FS.SectorsTrack)
		}
		for _, f := range p.Files {
			if f.Dir {
				fmt.Fprintf(tw, "  \t%s/\n", f.Name)
			} else {
				fmt.Fprintf(tw, "  \t%s\t%d\n", f.Name, f.Size)
			}
		}
	}
	for _, f := range info.Flash {
		fmt.Fprintf(tw, "flash %s:\t%#x, %#x bytes", f.Name, f.Offset, f.Size)
		if f.DataLength > 0 {
			fmt.Fprintf(tw, ", %d bytes of %s, sha256 %s", f.DataLength, f.Content, f.SHA256)
		} else if f.Content != "" {
			fmt.Fprintf(tw, ", %s", f.Content)
		}
		fmt.Fprintln(tw)
	}
	for _, e := range info.FIS {
		fmt.Fprintf(tw, "FIS entry:\t%-15s flash %#08x mem %#08x size %#x entry %#08x data %#x\n", e.Name, e.FlashBase, e.MemBase, e.Size, e.Entry, e.DataLength)
	}
	if info.Trailer != "" {
		fmt.Fprintf(tw, "Sercomm trailer:\t%s\n", info.Trailer)
	}
	tw.Flush()
	if info.BootConfig != "" {
		fmt.Fprintf(w, "\nboot configuration (SYSLINUX):\n%s", indent(info.BootConfig))
	}
	if m := info.Manifest; m != nil {
		fmt.Fprintf(w, "\nmanifest (%s):\n  board %s, cards [%s], %s, built by %s, SOURCE_DATE_EPOCH %d\n", info.ManifestFrom,
			m.Board, strings.Join(m.Cards, " "), m.Boot, m.Tool, m.SourceDateEpoch)
		if m.KernelVersion != "" || m.Cmdline != "" {
			fmt.Fprintf(w, "  kernel %s, command line %q\n", m.KernelVersion, m.Cmdline)
		}
		if m.Image != nil {
			fmt.Fprintf(w, "  image sha256 %s\n", m.Image.SHA256)
		}
		for _, k := range sortedKeys(m.Inputs) {
			fmt.Fprintf(w, "  input %s sha256 %s\n", k, m.Inputs[k])
		}
	}
	if st := info.Store; st != nil {
		fmt.Fprintf(w, "\nstore on the data partition: %d boots, state record %d (%s), %d log records", st.Boot, st.Seq, orNone(st.From), len(st.Log))
		if len(st.Values) > 0 {
			fmt.Fprintf(w, ", values %s", strings.Join(st.Values, ", "))
		}
		fmt.Fprintln(w)
		for _, n := range st.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if len(info.Reports) > 0 {
		fmt.Fprintf(w, "\nreports on the data partition, latest first:\n")
		for _, r := range info.Reports {
			if r.Report == nil {
				fmt.Fprintf(w, "  %s: unreadable: %s\n", r.Name, r.Error)
				continue
			}
			fmt.Fprintf(w, "  %s: boot %d, kernel %s, self-test %s\n", r.Name, r.Report.Boot, r.Report.Env.Kernel, r.Report.Tally())
		}
	}
	for _, p := range info.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	return nil
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}
