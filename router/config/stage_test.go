package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadStagedSkipsUploadsInFlight: what sshd is still receiving (a
// hidden name) is never applied, alone or beside whole files.
func TestReadStagedSkipsUploadsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		wantErr string
		want    []string // key files read beside site.json
	}{
		{"only an upload in flight", map[string]string{".upload-1": `{"half`}, "no " + SiteName, nil},
		{"a whole site and a key in flight", map[string]string{SiteName: `{}`, ".upload-2": "key"}, "", nil},
		{"whole files", map[string]string{SiteName: `{}`, "a.key": "k"}, "", []string{"a.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, c := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			site, files, err := ReadStaged(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(site) != tc.files[SiteName] {
				t.Fatalf("site %q, err %v", site, err)
			}
			var got []string
			for n := range files {
				got = append(got, n)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("key files %v, want %v", got, tc.want)
			}
		})
	}
}
