package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPCIIDJSON(t *testing.T) {
	id := PCIID{Vendor: 0x13a3, Device: 0x001d, Chip: "Hifn 7956"}
	b, err := json.Marshal(id)
	if err != nil || string(b) != `{"pci":"13a3:001d","chip":"Hifn 7956"}` {
		t.Fatalf("%s %v", b, err)
	}
	var back PCIID
	if err := json.Unmarshal(b, &back); err != nil || back != id {
		t.Errorf("round trip: %+v %v", back, err)
	}
	for _, bad := range []string{`{"pci":"13a3"}`, `{"pci":"13a3:001d:1"}`, `{"pci":"xyzw:0001"}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil || !strings.Contains(err.Error(), "want vendor:device in hex") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// The stand-ins for hardware are marked as such, and only they: a real
// engine has no QEMU options and is not test-only, a stand-in serves
// exactly the catalog's AES-CBC ciphers at one driver name and priority
// above kernel software's, and the QEMU one carries a complete -object
// and -device pair that names its backend.
func TestStandIns(t *testing.T) {
	soft, _ := LookupEngine(KernelSoft)
	softAES, _ := soft.Serves("aes-128-cbc")
	for _, tc := range []struct {
		id, driver, module string
		prio               int
		emulated, testOnly bool
	}{
		{VirtioCrypto, VirtioCryptoAESDriver, "virtio_crypto", 150, true, false},
		{TestAES, TestAESDriver, TestAESModule, TestAESPriority, false, true},
	} {
		e, ok := LookupEngine(tc.id)
		if !ok {
			t.Fatalf("%s not in the catalog", tc.id)
		}
		if e.Emulated() != tc.emulated || e.TestOnly != tc.testOnly || !e.StandIn() || !e.Hardware || e.Module != tc.module || !e.Async {
			t.Errorf("%s: emulated %v test-only %v stand-in %v hardware %v module %q async %v", tc.id, e.Emulated(), e.TestOnly, e.StandIn(), e.Hardware, e.Module, e.Async)
		}
		var names []string
		for _, cs := range e.Ciphers {
			names = append(names, cs.Cipher)
			if cs.Driver != tc.driver || cs.Priority != tc.prio || cs.Priority <= softAES.Priority || len(cs.HWKeyBits) != 3 {
				t.Errorf("%s %s: %+v", tc.id, cs.Cipher, cs)
			}
		}
		if got := strings.Join(names, " "); got != "aes-128-cbc aes-192-cbc aes-256-cbc" {
			t.Errorf("%s serves %s", tc.id, got)
		}
	}
	v, _ := LookupEngine(VirtioCrypto)
	if q := strings.Join(v.QEMU, " "); q != "-object cryptodev-backend-builtin,id=ocfwcrypto0 -device virtio-crypto-pci,cryptodev=ocfwcrypto0" {
		t.Errorf("virtio-crypto QEMU options: %s", q)
	}
	if len(v.LoadFirst) != 1 || v.LoadFirst[0] != "virtio_pci" {
		t.Errorf("virtio-crypto loads first %q, want its bus driver virtio_pci", v.LoadFirst)
	}
	for _, e := range Engines() {
		if e.ID != VirtioCrypto && e.ID != TestAES && e.StandIn() {
			t.Errorf("%s is marked as a stand-in", e.ID)
		}
	}
}
