//go:build windows

package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/pyexec/pyexec/internal/sandbox"
)

// tree is a run's Job Object: every process Python starts belongs to it,
// closing it (or TerminateJobObject) kills them all, and it caps the run's
// memory and process count and accounts CPU time and peak memory for the
// whole tree.
type tree struct {
	job    windows.Handle
	limits sandbox.Limits
	// noExtra: Windows cannot hand a child inherited descriptors beyond
	// the standard streams, so the run gets none (job progress reports,
	// which use one, are unavailable there).
	noExtra bool
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

func newTree(cmd *exec.Cmd, limits sandbox.Limits) (*tree, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("create job object: %w", err)
	}
	t := &tree{job: job, limits: limits, noExtra: len(cmd.ExtraFiles) > 0}
	cmd.ExtraFiles = nil
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if limits.MemoryBytes > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(limits.MemoryBytes)
	}
	if limits.MaxProcs > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		info.BasicLimitInformation.ActiveProcessLimit = uint32(limits.MaxProcs)
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return nil, fmt.Errorf("set job object limits: %w", err)
	}
	return t, nil
}

// started puts Python into the job. A process it starts in the first
// instants, before this call, would escape the job: Python's own startup
// starts none.
func (t *tree) started(p *os.Process) (applied, skipped []string, err error) {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.Pid))
	if err != nil {
		return nil, nil, fmt.Errorf("open process %d: %w", p.Pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(t.job, h); err != nil {
		return nil, nil, fmt.Errorf("assign process %d to its job object: %w", p.Pid, err)
	}
	applied = []string{"job object (tree kill)"}
	if t.limits.MemoryBytes > 0 {
		applied = append(applied, "job memory limit")
	}
	if t.limits.MaxProcs > 0 {
		applied = append(applied, "job process limit")
	}
	skipped = []string{"file size, open files and CPU time limits on windows"}
	if t.noExtra {
		skipped = append(skipped, "extra descriptors for the run (job progress reports) on windows")
	}
	return applied, skipped, nil
}

// terminate: Windows has no SIGTERM to send a console-less tree, so the
// job is ended at once.
func (t *tree) terminate() bool { return false }

func (t *tree) kill() { _ = windows.TerminateJobObject(t.job, 1) }

func (t *tree) close() { _ = windows.CloseHandle(t.job) }

func (t *tree) limitHit() string {
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if windows.QueryInformationJobObject(t.job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil) != nil {
		return ""
	}
	if t.limits.MemoryBytes > 0 && uint64(info.PeakJobMemoryUsed) >= uint64(t.limits.MemoryBytes) {
		return sandbox.LimitMemory
	}
	return ""
}

// usage is the whole job's CPU time and peak committed memory.
func (t *tree) usage(ps *os.ProcessState) (user, sys float64, maxRSS int64) {
	var acct jobAccounting
	if windows.QueryInformationJobObject(t.job, windows.JobObjectBasicAccountingInformation, uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil) == nil {
		user, sys = float64(acct.TotalUserTime)/1e7, float64(acct.TotalKernelTime)/1e7
	} else if ps != nil {
		user, sys = ps.UserTime().Seconds(), ps.SystemTime().Seconds()
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if windows.QueryInformationJobObject(t.job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil) == nil {
		maxRSS = int64(info.PeakProcessMemoryUsed)
	}
	return user, sys, maxRSS
}

func signalOf(*os.ProcessState) int { return 0 }
