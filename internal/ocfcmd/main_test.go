package ocfcmd

import (
	"os"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestMain lets TestKernelSelftest boot this package's tests as /init.
func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }
