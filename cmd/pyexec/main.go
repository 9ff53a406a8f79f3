// Command pyexec runs Python for AI agents (MCP over stdio or HTTP) and for
// people at a terminal. main only wires: everything lives in internal/.
package main

import (
	"os"

	"github.com/pyexec/pyexec/internal/cli"
	"github.com/pyexec/pyexec/internal/launcher"
)

func main() {
	// Each run re-executes this binary as its launcher; that path never
	// returns.
	launcher.MaybeRun()
	os.Exit(cli.Main(os.Args[1:]))
}
