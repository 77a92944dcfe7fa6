package testengine

import (
	"os"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestMain hands over to the kernel-in-the-loop harness: on the host it
// runs the tests; as /init of the QEMU guest it loads the modules and runs
// the TestGuest* tests against them.
func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }
