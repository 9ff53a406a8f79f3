package engine

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// runBothModes runs the package's tests cold, then again in a child test
// binary (same flags) with PYEXEC_TEST_WARM=1, where every engine a test
// creates without an explicit warm configuration gets warm interpreters that
// the runs wait for. So every engine test checks the warm path too, with
// the same expectations and the same sandbox (the default one, or the
// test's). The pass ends with how many runs went warm and why others did
// not. PYEXEC_TEST_WARM=0 runs the cold pass only.
func runBothModes(m *testing.M) int {
	switch os.Getenv("PYEXEC_TEST_WARM") {
	case "1":
		forcedWarm = &WarmConfig{Spares: 2, wait: true}
		code := m.Run()
		forcedMu.Lock()
		engines := forcedEngines
		forcedMu.Unlock()
		var total WarmStats
		total.ColdReasons = map[string]uint64{}
		for _, e := range engines {
			st := e.WarmStats()
			total.Warm += st.Warm
			total.Cold += st.Cold
			for k, v := range st.ColdReasons {
				total.ColdReasons[k] += v
			}
			e.Close()
		}
		var reasons []string
		for k, v := range total.ColdReasons {
			reasons = append(reasons, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(reasons)
		fmt.Printf("warm pass: %d engines, %d runs warm, %d cold (%s)\n", len(engines), total.Warm, total.Cold, strings.Join(reasons, ", "))
		return code
	case "0":
		forcedPrestartWait = true
		return m.Run()
	}
	forcedPrestartWait = true
	code := m.Run()
	if code != 0 {
		return code
	}
	fmt.Println("=== the same tests with warm interpreters (PYEXEC_TEST_WARM=1)")
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "PYEXEC_TEST_WARM=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return 1
	}
	return 0
}
