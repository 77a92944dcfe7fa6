package boot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/router/config"
	"github.com/ocfw/ocfw/router/sshd"
	"github.com/ocfw/ocfw/site"
	"github.com/ocfw/ocfw/store"
)

// StagingDir is SSH's sftp staging area, the one `ocf config stage` and
// `ocf config apply` use: in RAM, so nothing an upload does touches the
// card; only validated content moves from there into the store.
const StagingDir = config.StagingDir

// bootManifest is the image's manifest on a CF card's boot partition
// (firmware.BootManifest, a host package).
const bootManifest = "/ocfw/manifest.json"

// cardView is what SSH's sftp shows read-only: what the card keeps,
// read afresh through the store at each request, and the firmware's own
// files. Key material is left out entirely — the tunnels' key files
// (PSKs, manual keys) and the SSH host keys, which the store keeps
// among its values: the site config already names the key files, and a
// listing of names would only invite a download that must fail.
// site.json is the config the router runs when asked (sc): after a push,
// the pushed one, provisional or confirmed.
func cardView(cfg *Config, st *store.Store) func(sc *site.Site) []sshd.ViewFile {
	return func(sc *site.Site) []sshd.ViewFile {
		var v []sshd.ViewFile
		if st != nil {
			reports := st.Contents().Reports // newest first
			for i, r := range reports {
				js := r.JSON
				read := func() ([]byte, error) { return js, nil }
				if i == 0 {
					v = append(v, sshd.ViewFile{Path: "report.json", Read: read})
				}
				v = append(v, sshd.ViewFile{Path: fmt.Sprintf("reports/boot-%d.json", r.Boot), Read: read})
			}
			v = append(v, sshd.ViewFile{Path: "log.txt", Read: func() ([]byte, error) {
				lines, err := st.ReadLog()
				if err != nil {
					return nil, err
				}
				var b strings.Builder
				for _, l := range lines {
					fmt.Fprintf(&b, "%s %s\n", l.Time.Format(time.RFC3339), store.Printable(l.Text))
				}
				return []byte(b.String()), nil
			}})
		} else {
			// No data partition: the report stays in RAM.
			v = append(v, fileView(cfg, "report.json", filepath.Join(plan.RunDir, "report.json")))
		}
		if sc != nil {
			v = append(v, sshd.ViewFile{Path: "site.json", Read: sc.JSON})
		}
		v = append(v, fileView(cfg, "plan.json", plan.File))
		v = append(v, sshd.ViewFile{Path: "manifest.json", Read: func() ([]byte, error) { return readBootManifest(cfg) }})
		return v
	}
}

// fileView is a file of the board's RAM file system.
func fileView(cfg *Config, name, path string) sshd.ViewFile {
	return sshd.ViewFile{Path: name, Read: func() ([]byte, error) {
		f, err := os.Open(cfg.path(path))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, plan.MaxFileSize))
	}}
}

// readBootManifest reads the image's manifest from the boot partition
// through the read-only FAT reader (the partition is never mounted).
func readBootManifest(cfg *Config) ([]byte, error) {
	dev, err := FindLabel(cfg.path("/sys/class/block"), cfg.path("/dev"), plan.BootLabel)
	if err != nil {
		return nil, errors.New("no boot partition: this image keeps its manifest beside it on the PC")
	}
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	fsys, err := fat.Open(f, 0, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dev, err)
	}
	return fsys.ReadFile(bootManifest, plan.MaxFileSize)
}
