package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pyexec/pyexec/internal/testutil/pyinterp"
	"github.com/pyexec/pyexec/internal/testutil/realpkg"
	"github.com/pyexec/pyexec/internal/uvenv"
)

// realPreloadCode uses each library the way agents do, in a fork of a zygote
// that preloaded it: BLAS threads after fork (numpy matmul), pandas groupby,
// a matplotlib figure saved with Agg, a scikit-learn fit, and a fresh HTTP
// connection with requests. It prints one line per check.
const realPreloadCode = `import os, sys
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from sklearn.linear_model import LinearRegression
import requests

a = np.arange(40000, dtype=float).reshape(200, 200) / 40000
m = a @ a
print("matmul", bool(np.allclose(m, np.einsum("ij,jk->ik", a, a))))
df = pd.DataFrame({"k": ["x", "y", "x", "y"], "v": [1, 2, 3, 4]})
print("groupby", df.groupby("k").v.sum().to_dict())
plt.plot([1, 2])
plt.savefig("p.png")
with open("p.png", "rb") as f:
    print("savefig", plt.get_backend().lower(), f.read(8) == b"\x89PNG\r\n\x1a\n")
X = np.arange(20, dtype=float).reshape(-1, 1)
print("fit", round(float(LinearRegression().fit(X, 2 * X.ravel() + 1).coef_[0]), 6))
print("requests", requests.get(sys.argv[1], timeout=10).text)
`

// TestAdaptivePreloadRealPackages installs numpy, pandas, matplotlib,
// scikit-learn and requests from the package registry (through the shared
// uv cache), lets adaptive preload learn them, and checks that runs forked
// from the zygote that preloaded them compute what they should.
func TestAdaptivePreloadRealPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("installs real packages")
	}
	if forcedWarm != nil {
		t.Skip("sets its own warm configuration: the cold pass ran it")
	}
	if _, err := uvenv.FindUV(os.Environ()); err != nil {
		t.Skip(err)
	}
	realpkg.UseSharedCache(t)
	python := pyinterp.Real(t)
	e, _ := newTestEngine(t, func(c *Config) {
		c.Python = python
		// Every module that costs a millisecond (requests costs less than
		// 20 ms once urllib3 is preloaded): all five must end up imported.
		c.Warm = WarmConfig{Spares: 1, wait: true, Auto: &AutoPreload{Window: 4, Hits: 2, MinCost: time.Millisecond, MaxModules: 16}}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	deps := []string{"numpy", "pandas", "matplotlib", "scikit-learn", "requests"}
	req := Request{Code: realPreloadCode, Dependencies: deps, Args: []string{srv.URL}, Timeout: 300}
	want := []string{"matmul True", "groupby {'x': 4, 'y': 6}", "savefig agg True", "fit 2.0", "requests hello"}
	check := func(i int, res Result) {
		t.Helper()
		if res.ExitCode != 0 {
			t.Fatalf("run %d: exit %d: %s", i, res.ExitCode, res.Stderr)
		}
		for _, w := range want {
			if !strings.Contains(res.Stdout, w+"\n") {
				t.Fatalf("run %d: output lacks %q:\n%s%s", i, w, res.Stdout, res.Stderr)
			}
		}
	}
	wanted := []string{"numpy", "pandas", "matplotlib", "sklearn", "requests"}
	var st InterpreterPreloadStat
	for i := 0; i < 24; i++ {
		res := run(t, e, req)
		check(i, res)
		awaitReplacements(t, e)
		st, _ = preloadOf(e, res.Executable)
		if z := servingZygote(e, res.Executable); z != nil && !slices.ContainsFunc(wanted, func(m string) bool { return !z.modules[m] }) {
			// The next runs fork from a zygote that imported all five.
			for j := 0; j < 3; j++ {
				check(100+j, run(t, e, req))
			}
			if st.CostMS["matplotlib.pyplot"] <= 0 {
				t.Errorf("no import time measured for matplotlib.pyplot: %v", st.CostMS)
			}
			t.Logf("preloaded %v, import ms %v, rss %d MiB, excluded %v", st.Preloaded, st.CostMS, st.RSSBytes>>20, st.Excluded)
			return
		}
	}
	t.Fatalf("after 24 runs adaptive preload has %+v; want %v imported by the zygote", st, wanted)
}

// servingZygote is the ready zygote of interp with the newest preload
// generation.
func servingZygote(e *Engine, interp string) *zygote {
	e.warm.mu.Lock()
	defer e.warm.mu.Unlock()
	var best *zygote
	for _, l := range e.warm.zs {
		for _, z := range l {
			select {
			case <-z.ready:
			default:
				continue
			}
			if z.err == nil && strings.HasPrefix(z.key, interp) && (best == nil || z.gen > best.gen) {
				best = z
			}
		}
	}
	return best
}
