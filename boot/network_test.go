package boot

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/labtest"
	"github.com/ocfw/ocfw/site"

	"github.com/ocfw/ocfw/store"
)

const builtinSite = `{"kind": "site", "board": "alix2d13", "hostname": "builtin",
 "wan": {"port": "wan", "address": "dhcp"},
 "lan": {"ports": ["lan1"], "address": "192.168.1.1/24"}}`

// The card's copy of the site config wins when valid; a broken one is
// reported and the built-in one used; without either the router is off.
func TestLoadSite(t *testing.T) {
	pl := testPlan(t)
	if len(pl.Ports) == 0 {
		t.Fatal("the test plan has no ports")
	}
	for _, tc := range []struct {
		name    string
		builtin string // "" : none in the image
		card    string // "" : none on the card
		host    string // hostname of the site used; "" : none
		note    string
	}{
		{"built-in only", builtinSite, "", "builtin", "site config: the one built into the image"},
		{"valid card copy wins", builtinSite, strings.Replace(builtinSite, `"builtin"`, `"fromcard"`, 1), "fromcard", "the copy on the data partition"},
		{"broken card copy: built-in used", builtinSite, strings.Replace(builtinSite, `"lan1"`, `"lan9"`, 1), "builtin",
			`site config on the data partition is invalid, the built-in one is used: data partition /ocfw/site.json: lan.ports[0]: "lan9" is not a port of this board`},
		// Configs the router used to apply only in part (no firewall, so
		// no forwarding; no SSH): refused whole, the built-in one runs.
		{"card copy forwarding a port twice: built-in used", builtinSite, strings.Replace(builtinSite, `"lan": {`,
			`"firewall": {"port_forwards": [{"proto": "tcp", "port": 80, "to": "192.168.1.10"}, {"proto": "tcp", "port": 80, "to": "192.168.1.11"}]},
 "lan": {`, 1), "builtin",
			"site config on the data partition is invalid, the built-in one is used: data partition /ocfw/site.json: firewall.port_forwards[1].port: tcp 80 is forwarded by firewall.port_forwards[0] already"},
		{"card copy with a garbage key line: built-in used", builtinSite, strings.Replace(builtinSite, `"lan": {`,
			`"ssh": {"authorized_keys": ["ssh-ed25519 hunter2"]},
 "lan": {`, 1), "builtin", "ssh.authorized_keys[0]: not a public key"},
		{"card copy with a range up to the broadcast: built-in used", builtinSite, strings.Replace(builtinSite, `"address": "192.168.1.1/24"`,
			`"address": "192.168.1.1/24", "dhcp": {"range": ["192.168.1.100", "192.168.1.255"]}`, 1), "builtin",
			"lan.dhcp.range[1]: 192.168.1.255 is the broadcast address of the LAN"},
		{"card copy with a JSON typo", builtinSite, strings.Replace(builtinSite, `"hostname":`, `"hostname"`, 1), "builtin", "JSON syntax"},
		{"neither", "", "", "", "no site config in this image: the firmware does not route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.builtin != "" {
				write(t, filepath.Join(root, site.File), []byte(tc.builtin))
			}
			data := dataPartition(t)
			if tc.card != "" {
				src := filepath.Join(t.TempDir(), "site.json")
				write(t, src, []byte(tc.card))
				cmd := exec.Command("mcopy", "-i", data, src, "::/ocfw/site.json")
				cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null")
				if out, err := cmd.CombinedOutput(); err != nil {
					labtest.SkipOrFail(t, "mcopy: %v %s", err, out)
				}
			}
			f, err := os.OpenFile(data, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, _ := f.Stat()
			st, err := store.Open(f, fi.Size(), store.Options{})
			if err != nil {
				t.Fatalf("a PC writing site.json must leave the store usable: %v", err)
			}
			cfg := &Config{Root: root}
			site, notes := loadSite(cfg, pl, st)
			host := ""
			if site != nil {
				host = site.Hostname
			}
			if host != tc.host || !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("site %q, notes %q; want %q and a note with %q", host, notes, tc.host, tc.note)
			}
		})
	}
}

// The boot's log sink escapes what the router hands it before the
// console and the card see it (the last line of defence: the router
// escapes too), and the card gets every line, quiet ones included.
func TestLogSinksEscape(t *testing.T) {
	img := dataPartition(t)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	st, err := store.Open(f, fi.Size(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lw := store.NewLogWriter(st, store.LogWriterOptions{})
	var console strings.Builder
	cfg := &Config{Console: &console}
	log, event, quiet := logSinks(cfg, lw)
	const evil = "evil\x1b]0;PWNED\a\x1b[2J...\r\nocfw: ssh: root logged in from 6.6.6.6"
	log("lease %s to %s (%s)", "192.168.1.100", "3c:00:00:00:00:01", evil)
	event("dhcp: no address for %s (%s)", "3c:00:00:00:00:02", evil)
	quiet("ntp: %s", evil)
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	var card []string
	for _, l := range loadStore(t, img).Log {
		card = append(card, l.Text)
	}
	for where, text := range map[string]string{"console": console.String(), "card": strings.Join(card, "\n") + "\n"} {
		if strings.ContainsAny(text, "\x1b\r\a") {
			t.Errorf("%s: a control character survived: %q", where, text)
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		for _, l := range lines {
			if strings.HasPrefix(l, "ocfw: ssh:") || strings.HasPrefix(l, "ssh:") {
				t.Errorf("%s: forged line %q", where, l)
			}
		}
		want := 3
		if where == "console" {
			want = 2 // quiet lines are the card's only
		}
		if len(lines) != want {
			t.Errorf("%s: %d lines, want %d: %q", where, len(lines), want, lines)
		}
	}
}
