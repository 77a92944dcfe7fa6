package boot

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ocfw/ocfw/internal/fat"
	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/store"
)

// TestRunAfterTheStateWasLost: both state copies damaged (a failing
// card): the boot says the state was lost, on the console and in the
// card's log, not that a power cut left it; it takes the number after
// the newest report and overwrites none.
func TestRunAfterTheStateWasLost(t *testing.T) {
	root := fakeRoot(t, testPlan(t), `{"speed_budget": "0s"}`)
	data := dataPartition(t)
	for i := 0; i < 2; i++ {
		Run(context.Background(), Config{Root: root, Console: &bytes.Buffer{}, DataDevice: data, Loader: &fakeLoader{}})
	}
	before := loadStore(t, data)
	if len(before.Reports) != 2 {
		t.Fatalf("%d reports after two boots", len(before.Reports))
	}
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fat.Open(bytes.NewReader(b), 0, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{store.StateA, store.StateB} {
		e, err := fsys.Extent(store.Dir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b[e.Offset+40] ^= 0x5a // the payload's checksum no longer holds
	}
	write(t, data, b)

	var con bytes.Buffer
	out := Run(context.Background(), Config{Root: root, Console: &con, DataDevice: data, Loader: &fakeLoader{}})
	c := con.String()
	if !strings.Contains(c, "ocfw: store: THE CARD'S STATE WAS LOST") || strings.Contains(c, "power cut leaves this") {
		t.Errorf("the console does not say the state was lost:\n%s", c)
	}
	if out.Boot != 3 || !strings.Contains(c, plan.MarkReportWritten+"/ocfw/report-03.json (boot 3)") {
		t.Errorf("boot %d after losing the state of two boots:\n%s", out.Boot, c)
	}
	after := loadStore(t, data)
	if len(after.Reports) != 3 || !bytes.Equal(after.Reports[1].JSON, before.Reports[0].JSON) || !bytes.Equal(after.Reports[2].JSON, before.Reports[1].JSON) {
		t.Errorf("%d reports after the loss; the earlier ones must be kept as they were", len(after.Reports))
	}
	logged := false
	for _, l := range after.Log {
		logged = logged || strings.HasPrefix(l.Text, "store: THE CARD'S STATE WAS LOST")
	}
	if !logged {
		t.Errorf("the card's log does not say the state was lost: %+v", after.Log)
	}
}
