package drivers

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
