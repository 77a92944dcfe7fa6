package boards

import (
	"testing"

	"github.com/ocfw/ocfw/drivers/catalog"
	"github.com/ocfw/ocfw/ocf/kcrypto"
	"github.com/ocfw/ocfw/plan"
)

// kernelEngines, which decides whether the plan loads the ESP run's
// modules, asks what ocf/kcrypto ranks at boot (kcrypto.PlanEngines):
// boards answers it from the plan so as not to import the crypto core.
func TestKernelEnginesAsKcrypto(t *testing.T) {
	soft := plan.Engine{ID: "go", From: "software"}
	afalg := plan.Engine{ID: "geode-aes", Hardware: true, API: catalog.APIAFALG}
	cryptodev := plan.Engine{ID: "safenet", Hardware: true, API: catalog.APICryptodev}
	kernelSoft := plan.Engine{ID: "kernel", API: catalog.APIAFALG}
	for _, c := range []struct {
		name    string
		engines []plan.Engine
		want    bool
	}{
		{"none", nil, false},
		{"software only", []plan.Engine{soft, kernelSoft}, false},
		{"an OCF engine only", []plan.Engine{soft, cryptodev}, false},
		{"a kernel engine", []plan.Engine{soft, afalg}, true},
		{"both", []plan.Engine{cryptodev, afalg}, true},
	} {
		p := &plan.Plan{Engines: c.engines}
		if got, k := kernelEngines(p), len(kcrypto.PlanEngines(p)) > 0; got != c.want || k != c.want {
			t.Errorf("%s: kernelEngines %v, kcrypto.PlanEngines non-empty %v; want %v", c.name, got, k, c.want)
		}
	}
}
