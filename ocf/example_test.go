package ocf_test

import (
	"fmt"
	"os"

	"github.com/ocfw/ocfw/ocf"
	"github.com/ocfw/ocfw/ocf/fault"
	"github.com/ocfw/ocfw/ocf/soft"
)

// A dispatcher over one engine (here a test engine that fails 8192-byte
// requests) and Go software: requests under 256 bytes run in software,
// the engine's failure is redone in software, and the stats say so.
func ExampleDispatcher() {
	engine := fault.NewFailing("cbc-aes-test", soft.New(), fault.Sizes(8192))
	policy := ocf.Policy{
		Trusted: []string{"cbc-aes-test"}, // e.g. after its self-test passed
		Ciphers: map[string]ocf.CipherPolicy{"aes-128-cbc": {MinHardware: 256}},
	}
	d, err := ocf.NewDispatcher(soft.New(), []ocf.Driver{engine}, policy)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := ocf.LookupCipher("aes-128-cbc")
	s, err := d.Open(c, make([]byte, 16))
	if err != nil {
		fmt.Println(err)
		return
	}
	iv := make([]byte, 16)
	reqs := []ocf.Request{
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 64)},   // software: under 256 bytes
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 1024)}, // engine
		{Op: ocf.Encrypt, IV: iv, Src: make([]byte, 8192)}, // engine fails, software redoes it
	}
	fmt.Println(s.Driver(), s.Do(reqs))
	s.Close()
	d.WriteStats(os.Stdout)
	// Output:
	// dispatch(cbc-aes-test,go) <nil>
	//         driver   hw  requests  bytes  errors  fallbacks  timeouts  verified  mismatches  time  us/req
	//   cbc-aes-test  yes         2   9216       1          1         0         0           0     -       -
	//             go   no         2   8256       0          0         0         0           0     -       -
}
