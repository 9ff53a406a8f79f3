package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"text/tabwriter"

	"github.com/pyexec/pyexec/internal/engine"
)

// runDoctor tells an operator what this machine offers pyexec.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var ef engineFlags
	var asJSON bool
	fs := newFlagSet("doctor", "doctor [flags]", stderr, engineEnv)
	ef.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args, engineEnv, stderr); !ok {
		return code
	}
	warm, preload, auto := ef.warm, ef.preload, ef.preloadAuto
	ef.warm = 0 // doctor runs nothing worth warming
	ef.prestart = 0
	ex, err := ef.executor()
	if err != nil {
		fmt.Fprintf(stderr, "pyexec doctor: %v\n", err)
		return 1
	}
	ex.Engine().CompleteInterpreters(ctx) // uv's answer too, if none is cached
	defer ex.Engine().Close()
	info, err := ex.Info(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pyexec doctor: %v\n", err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			return 1
		}
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "pyexec\t%s\n", info.Version)
	fmt.Fprintf(w, "workspace\t%s\n", info.Workspace)
	fmt.Fprintf(w, "state dir\t%s\n", info.StateDir)
	fmt.Fprintf(w, "uv\t%s\n", info.UV)
	fmt.Fprintf(w, "default python\t%s (%s)\n", info.DefaultInterpreter.Version, info.DefaultInterpreter.Path)
	l := info.Limits
	fmt.Fprintf(w, "timeout\t%gs default, %gs max (runs that are not jobs; jobs: --job-timeout of pyexec mcp/serve)\n", l.DefaultTimeoutSeconds, l.MaxTimeoutSeconds)
	fmt.Fprintf(w, "inline code\t%s max\n", engine.FormatBytes(int64(l.MaxCodeBytes)))
	fmt.Fprintf(w, "inline output\t%s per stream (head and tail kept)\n", engine.FormatBytes(int64(l.OutputCapBytes)))
	fmt.Fprintf(w, "batch\t%d snippets, %d workers\n", l.MaxBatch, l.MaxWorkers)
	if l.TmpLimitBytes > 0 {
		fmt.Fprintf(w, "run temp dirs\t%s in total, in memory (each run's temp files also count against its memory limit)\n", engine.FormatBytes(l.TmpLimitBytes))
	} else {
		fmt.Fprintf(w, "run temp dirs\t%s\n", l.TmpNote)
	}
	switch {
	case engine.WarmUnsupported != "":
		fmt.Fprintf(w, "warm interpreters\toff: %s\n", engine.WarmUnsupported)
	case warm > 0:
		fmt.Fprintf(w, "warm interpreters\t%d pre-forked runs per interpreter (fork server, confined like cold runs), preload %q\n", warm, preload)
		if auto {
			fmt.Fprintf(w, "adaptive preload\ton: modules costing >= 20 ms that 2 of a warm interpreter's last 10 runs imported are preloaded by a replacement (at most 8, 1 GiB per fork server; server_info lists them and what was excluded); --preload-auto=false turns it off\n")
		} else {
			fmt.Fprintf(w, "adaptive preload\toff (--preload-auto=false)\n")
		}
	default:
		fmt.Fprintf(w, "warm interpreters\toff (--warm 0): every run starts a fresh interpreter\n")
	}
	fmt.Fprintf(w, "platform\t%s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "process tree\t%s\n", treeKill)
	sb := info.Sandbox
	fmt.Fprintf(w, "sandbox\t%s, network %s, run-as %s, best-effort %v\n", sb.Policy, sb.Network, sb.RunAs, sb.BestEffort)
	fmt.Fprintf(w, "runs execute as\t%s\n", sb.RunsAs)
	cpu := "unlimited"
	if sb.Limits.CPUSeconds >= 0 {
		cpu = fmt.Sprintf("%d s", sb.Limits.CPUSeconds)
	}
	fmt.Fprintf(w, "run limits\tmemory %s, cpu %s, processes %d, file size %s, open files %d\n",
		engine.FormatBytes(sb.Limits.MemoryBytes), cpu, sb.Limits.MaxProcs, engine.FormatBytes(sb.Limits.FileSizeBytes), sb.Limits.OpenFiles)
	w.Flush()
	fmt.Fprintln(stdout, "\nconfinement on this kernel:")
	fmt.Fprint(stdout, sb.Capabilities.String())
	if offLinux != "" {
		fmt.Fprintf(stdout, "\n%s\n", offLinux)
	}
	fmt.Fprintln(stdout, "\ninterpreters (newest first):")
	w = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, it := range info.Interpreters {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", it.Version, it.Path, it.Source)
	}
	w.Flush()
	return 0
}
