// Command ocfw builds firmware images for small routers with crypto
// engines and answers what a firmware for given hardware would contain.
// The commands live in internal/cli.
package main

import (
	"os"

	"github.com/ocfw/ocfw/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
