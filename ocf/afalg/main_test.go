package afalg

import (
	"os"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestMain hands over to the kernel-in-the-loop harness: on the host it
// just runs the tests; as /init of the QEMU guest it mounts /proc, /sys
// and /dev, loads the modules, sets OCFW_IN_GUEST=1, runs the tests and
// powers off.
func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }
