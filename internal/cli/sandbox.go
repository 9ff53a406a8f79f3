package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// sandboxFlags are the confinement flags of every subcommand that runs
// Python (see package sandbox for what each mechanism does).
type sandboxFlags struct {
	policy     string
	network    string
	runAs      string
	bestEffort bool
	memory     sizeFlag
	fileSize   sizeFlag
	cpuSeconds int64
	maxProcs   int64
	openFiles  int64
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	d := sandbox.DefaultLimits()
	f.memory, f.fileSize = sizeFlag(d.MemoryBytes), sizeFlag(d.FileSizeBytes)
	fs.StringVar(&f.policy, "sandbox", string(sandbox.DefaultPolicy), "confinement of every run: none, workspace (writes only in the workspace and a private temp dir; on a root server also PID, IPC and mount namespaces of its own) or strict (also no network, reads limited to Python and the workspace); requests may only tighten it")
	fs.StringVar(&f.network, "network", "", "allow or deny network access for runs (default: deny under strict, allow otherwise)")
	fs.StringVar(&f.runAs, "run-as", sandbox.RunAsAuto, "when the server is root, the user Python runs as: auto (nobody when it can reach the interpreter and write the workspace, counting what each run's private mount namespace binds from 0700 dirs like /root and an idmapped server-owned workspace; otherwise runs are refused with what to fix), none (root without capabilities), or a user name / uid[:gid]")
	fs.BoolVar(&f.bestEffort, "sandbox-best-effort", false, "run even when the kernel cannot enforce everything the policy asks for; what was skipped is reported in every result")
	fs.Var(&f.memory, "memory-limit", "memory cap of a run, all its processes together (bytes, or with K/M/G suffix; 0 or -1: unlimited)")
	fs.Int64Var(&f.cpuSeconds, "cpu-limit", -1, "CPU seconds a run's process may use (RLIMIT_CPU); -1: unlimited")
	fs.Int64Var(&f.maxProcs, "max-procs", d.MaxProcs, "processes and threads a run may have at once; -1: unlimited")
	fs.Var(&f.fileSize, "file-size-limit", "largest file a run may write (bytes, or with K/M/G suffix; -1: unlimited)")
	fs.Int64Var(&f.openFiles, "open-files", d.OpenFiles, "open file descriptors per process of a run (RLIMIT_NOFILE)")
}

// settings validates the flags into sandbox settings.
func (f *sandboxFlags) settings() (sandbox.Settings, error) {
	p, err := sandbox.ParsePolicy(f.policy)
	if err != nil {
		return sandbox.Settings{}, fmt.Errorf("--sandbox: %w", err)
	}
	n, err := sandbox.ParseNetwork(f.network)
	if err != nil {
		return sandbox.Settings{}, fmt.Errorf("--network: %w", err)
	}
	unlimitedIfZero := func(v int64) int64 {
		if v == 0 {
			return -1
		}
		return v
	}
	return sandbox.Settings{
		Policy:     p,
		Network:    n,
		BestEffort: f.bestEffort,
		Limits: sandbox.Limits{
			MemoryBytes:   unlimitedIfZero(int64(f.memory)),
			CPUSeconds:    unlimitedIfZero(f.cpuSeconds),
			MaxProcs:      unlimitedIfZero(f.maxProcs),
			FileSizeBytes: unlimitedIfZero(int64(f.fileSize)),
			OpenFiles:     unlimitedIfZero(f.openFiles),
		},
	}, nil
}

// sizeFlag is a byte count that accepts K, M, G, T suffixes (powers of
// 1024; KiB, MiB, ... and KB, MB, ... too) and prints the way it is typed
// (2GiB, not 2147483648). -1 is "unlimited" where a flag allows it.
type sizeFlag int64

func (s *sizeFlag) String() string {
	if s == nil {
		return "0"
	}
	n := int64(*s)
	if n < 0 {
		return strconv.FormatInt(n, 10)
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (s *sizeFlag) Set(v string) error {
	v = strings.TrimSpace(strings.ToUpper(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return fmt.Errorf("want a byte count like 2G, 512M or 1048576")
	case n < -1:
		return fmt.Errorf("must be -1 (unlimited) or a byte count >= 0, got %d", n)
	case n > 0 && n > math.MaxInt64/mult:
		return fmt.Errorf("%s is more than 8 EiB", v)
	}
	if n > 0 {
		n *= mult
	}
	*s = sizeFlag(n)
	return nil
}
