package layers

import "testing"

// TestVMTestIsTestOnly: internal/lab/vmtest, the VM test harness,
// imports testing; no command or library may link it.
func TestVMTestIsTestOnly(t *testing.T) {
	const vmtest = mod + "internal/lab/vmtest"
	for pkg, deps := range pkgs(t) {
		for _, d := range deps {
			if d == vmtest {
				t.Errorf("%s imports %s, a test-only package", pkg, vmtest)
			}
		}
	}
}
