package probe

import (
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/afalg"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/soft"
	"github.com/ocfw/ocfw/plan"
)

func TestFind(t *testing.T) {
	noAFALG := afalg.Available() != nil
	wants := []Want{
		{Engine: catalog.GoSoft, Driver: "go", API: catalog.APIGo, Cipher: "aes-128-cbc"},
		{Engine: catalog.SafeNet, Driver: "safe0", API: catalog.APICryptodev, Cipher: "des-cbc", Hardware: true},
		{Engine: catalog.GeodeAES, Driver: "cbc-aes-geode", API: catalog.APIAFALG, Cipher: "aes-128-cbc", Hardware: true},
		{Engine: "x", Driver: "x", API: "carrier-pigeon", Cipher: "aes-128-cbc"},
		{Engine: "x", Driver: "x", API: catalog.APIGo, Cipher: "rot13"},
		// A plan that says the engine cannot be there (a stand-in
		// kernel): not looked for, the plan's reason given.
		{Engine: catalog.IXP4xx, Driver: "cbc(aes)-ixp4xx", API: catalog.APIAFALG, Cipher: "aes-128-cbc", Hardware: true, Absent: "no IXP4xx in the stand-in"},
		{Engine: catalog.GoSoft, Driver: "go", API: catalog.APIGo, Cipher: "null", Absent: "said absent"},
	}
	targets := Find(wants, Options{Cryptodev: "/nonexistent/crypto", Extra: nil})
	if len(targets) != len(wants) {
		t.Fatalf("%d targets for %d wants", len(targets), len(wants))
	}
	if !targets[0].Present() || targets[0].Name != "go" {
		t.Errorf("go: %+v", targets[0])
	}
	if targets[1].Present() || !strings.Contains(targets[1].Reason, "OCF kernel with /dev/crypto") {
		t.Errorf("safenet: %+v", targets[1])
	}
	if noAFALG && (targets[2].Present() || !strings.Contains(targets[2].Reason, "AF_ALG")) {
		t.Errorf("geode without AF_ALG: %+v", targets[2])
	}
	if targets[3].Present() || !strings.Contains(targets[3].Reason, "unknown API") {
		t.Errorf("bad api: %+v", targets[3])
	}
	if targets[4].Present() || !strings.Contains(targets[4].Reason, "unknown cipher") {
		t.Errorf("bad cipher: %+v", targets[4])
	}
	for _, tg := range targets[5:] {
		if tg.Present() || tg.Reason != tg.Absent {
			t.Errorf("absent by the plan: present %v, reason %q, want %q", tg.Present(), tg.Reason, tg.Absent)
		}
	}
}

func TestFindExtra(t *testing.T) {
	bad := fault.NewCorrupting("bad", soft.New(), nil)
	wants := []Want{{Engine: catalog.GoSoft, Driver: "go", API: catalog.APIGo, Cipher: "hmac-sha1"}}
	targets := Find(wants, Options{Extra: []ocf.Driver{bad}})
	if len(targets) != 2 || targets[1].Name != "bad" || targets[1].Cipher != "hmac-sha1" || !targets[1].Hardware {
		t.Fatalf("%+v", targets)
	}
}

func TestPCIPresentReadsSysfs(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no PCI sysfs on this machine")
	}
	if pciPresent([]catalog.PCIID{{Vendor: 0xffff, Device: 0xffff}}) {
		t.Error("an impossible PCI id is present")
	}
}

// Wants carries an engine's Absent reason from the plan to each of its
// (engine, cipher) pairs, and to no other engine's.
func TestWantsAbsentFromPlan(t *testing.T) {
	p := &plan.Plan{
		Engines: []plan.Engine{{ID: catalog.IXP4xx, Hardware: true, Absent: "no IXP4xx here"}, {ID: catalog.GoSoft}},
		Ciphers: []plan.Cipher{{Cipher: "aes-128-cbc", Routes: []plan.Route{
			{Engine: catalog.IXP4xx, Driver: "cbc(aes)-ixp4xx", API: catalog.APIAFALG, Hardware: true},
			{Engine: catalog.GoSoft, Driver: "go", API: catalog.APIGo},
		}}},
	}
	ws, err := Wants(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Absent != "no IXP4xx here" || ws[1].Absent != "" {
		t.Fatalf("wants = %+v", ws)
	}
	ts := Find(ws, Options{})
	if ts[0].Present() || ts[0].Reason != "no IXP4xx here" || !ts[1].Present() {
		t.Errorf("targets = %+v", ts)
	}
}
