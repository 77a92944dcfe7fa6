package kcrypto

import (
	"os"
	"testing"

	"github.com/ocfw/ocfw/internal/lab/kerneltest"
)

// TestMain hands over to the kernel-in-the-loop harness (see
// kernel_test.go): on the host it just runs the tests.
func TestMain(m *testing.M) { os.Exit(kerneltest.Main(m)) }
