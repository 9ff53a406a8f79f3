package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/httpapi"
)

// runSessions lists or closes the live sessions of a running `pyexec
// serve` (sessions live in the server process, so this is a REST client).
func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var server, tokenFile, stateDir string
	fs := newFlagSet("sessions", "sessions [flags] list | close NAME", stderr, envSpec{})
	fs.StringVar(&server, "server", "http://127.0.0.1:8080", "URL of the `pyexec serve` whose sessions to show")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the server's bearer token (default: PYEXEC_TOKEN, else, for a server on this machine, STATE-DIR/server-token)")
	fs.StringVar(&stateDir, "state-dir", engine.DefaultStateDir(), "the server's state dir, where a local server's generated token is")
	if refusedTokenFlag("sessions", args, stderr) {
		return 2
	}
	if code, ok := parseFlags(fs, args, envSpec{}, stderr); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 || (rest[0] == "list" && len(rest) != 1) || (rest[0] == "close" && len(rest) != 2) || (rest[0] != "list" && rest[0] != "close") {
		fmt.Fprintln(stderr, "usage: pyexec sessions [flags] list | close NAME")
		return 2
	}
	token, _, err := clientToken(server, tokenFile, stateDir)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec sessions: %v\n", err)
		return 2
	}
	c, err := httpapi.NewClient(server, httpapi.ClientOptions{Token: token})
	if err != nil {
		fmt.Fprintf(stderr, "pyexec sessions: %v\n", err)
		return 2
	}
	if rest[0] == "close" {
		info, err := c.SessionClose(ctx, rest[1])
		if err != nil {
			fmt.Fprintf(stderr, "pyexec sessions: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "closed %s after %d cells (peak memory %.1f MB, CPU %.2f s)\n", info.Name, info.ExecutionCount, float64(info.PeakMemory)/(1<<20), info.CPUSeconds)
		return 0
	}
	list, err := c.SessionList(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec sessions: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCELLS\tIDLE\tMEMORY\tEXPIRES\tLABEL")
	for _, s := range list {
		status := s.Status
		if s.LostReason != "" {
			status += " (" + s.LostReason + ")"
		}
		expires := "-"
		if !s.ExpiresAt.IsZero() {
			expires = s.ExpiresAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f MB\t%s\t%s\n", s.Name, status, s.ExecutionCount,
			(time.Duration(s.IdleSeconds) * time.Second).String(), float64(s.MemoryBytes)/(1<<20), expires, s.Label)
	}
	tw.Flush()
	return 0
}
