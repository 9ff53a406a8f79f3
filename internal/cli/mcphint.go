package cli

import (
	"fmt"
	"io"
	"os"
)

// waitingHint is the one line `pyexec mcp` prints on stderr when a person
// starts it at a terminal: without it the server sits silently after its log
// lines, waiting for JSON-RPC that a person will never type.
const waitingHint = `pyexec mcp: waiting for an MCP client on stdin (JSON-RPC, one message per line); ` +
	`an MCP client such as Claude Desktop starts this command itself (see the README's client configuration). ` +
	`To try it here, paste {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"terminal","version":"0"}}} ` +
	`or run "pyexec run -c 'print(1)'"; Ctrl-D or Ctrl-C quits.`

// hintIfTerminal prints waitingHint when stdin is a terminal (a character
// device), which an MCP client's pipe never is.
func hintIfTerminal(stdin *os.File, stderr io.Writer) {
	fi, err := stdin.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return
	}
	fmt.Fprintln(stderr, waitingHint)
}
