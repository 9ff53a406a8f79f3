package present

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/pyexec/pyexec/internal/distname"
	"github.com/pyexec/pyexec/internal/engine"
)

var (
	netErrors   = regexp.MustCompile(`(?i)(Temporary failure in name resolution|Name or service not known|Network is unreachable|No address associated with hostname|nodename nor servname|getaddrinfo failed|Failed to resolve|NameResolutionError|Connection refused)`)
	pipInstall  = regexp.MustCompile(`(?m)(\bpip3?\s+install\b|-m\s+pip\b|pip\.main\(|["']pip["']\s*,\s*["']install["'])`)
	pipSucceded = regexp.MustCompile(`(?m)^Successfully installed (.+)$`)
)

// Hint says what to change when the fix for a failure is known: a missing
// module, the network denied, packages installed inside the run, a limit
// or the timeout hit.
func Hint(r engine.Result, code string) string {
	denied := strings.Contains(r.Sandbox, "network deny")
	switch {
	case r.Error != nil && r.Error.EName == "ModuleNotFoundError" && r.Error.Module != "":
		dist := distname.ForImport(r.Error.Module)
		if dist == "" {
			return fmt.Sprintf("the module %q is not installed in this run's environment, and its name does not say which package provides it: find the distribution that does and add it to dependencies: [...]", r.Error.Module)
		}
		return fmt.Sprintf("the module %q is not installed in this run's environment: add dependencies: [%q] to the call (installed once with uv, then cached for later runs)", r.Error.Module, dist)
	case denied && (netErrors.MatchString(tail(r.Stderr, 8192)) || isNetError(r.Error)):
		return "the network is denied for this run (" + networkSetting(r.Sandbox) + "), so connections and name lookups fail; use a server or call that allows the network, or give the data as a file (write_file) or stdin"
	case r.LimitExceeded != "":
		return limitHint(r.LimitExceeded)
	case r.TimedOut:
		return "the run hit its timeout: raise timeout (seconds, up to the server's maximum), or run it with mode: \"async\" and follow it with get_job"
	}
	if pipInstall.MatchString(code) || pipSucceded.MatchString(tail(r.Stdout, 65536)) {
		pkgs := ""
		if m := pipSucceded.FindStringSubmatch(tail(r.Stdout, 65536)); m != nil {
			pkgs = " (" + m[1] + ")"
		}
		return "packages installed inside a run" + pkgs + " go to its temporary home and are gone when it ends: list them in dependencies: [...] instead (installed once with uv and cached)"
	}
	return ""
}

func isNetError(e *engine.RunError) bool {
	if e == nil {
		return false
	}
	for _, n := range []string{"gaierror", "URLError", "ConnectionError", "ConnectError", "NewConnectionError", "MaxRetryError", "NameResolutionError", "ConnectTimeout", "herror"} {
		if strings.Contains(e.EName, n) {
			return true
		}
	}
	return netErrors.MatchString(e.EValue)
}

func networkSetting(sandbox string) string {
	switch {
	case strings.HasPrefix(sandbox, "strict"):
		return "sandbox strict has no network"
	default:
		return "network: deny, from the request or the server's --network deny"
	}
}

func limitHint(limit string) string {
	switch limit {
	case "memory":
		return "the run used more memory than its limit: use less (process data in chunks), or raise limits.memory_bytes up to the server's --memory-limit"
	case "cpu":
		return "the run used up its CPU time limit: raise limits.cpu_seconds up to the server's --cpu-limit"
	case "processes":
		return "the run started more processes or threads than its limit: use fewer workers, or raise limits.max_procs up to the server's --max-procs"
	case "file_size":
		return "the run wrote a file larger than its limit: write less, or raise limits.file_size_bytes up to the server's --file-size-limit"
	}
	return "the run hit its " + limit + " limit"
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
