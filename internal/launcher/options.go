package launcher

import "os"

// Options say how to start a launcher: which binary to re-execute and the
// files that become the run's standard streams.
type Options struct {
	// Executable is the binary that runs MaybeRun first; default /proc/self/exe.
	Executable string
	Stdin      *os.File // nil: /dev/null
	Stdout     *os.File
	Stderr     *os.File
	// OnStart is called with Python's pid once it runs.
	OnStart func(pid int)
	// OnStarted is called with the whole "started" event (its Sandbox says
	// what confinement is in force), after OnStart.
	OnStarted func(Event)
	// ExtraFiles are inherited by Python as fd 3, 4, ... (Spec.ExtraFiles
	// must say how many).
	ExtraFiles []*os.File

	// afterDone is called once the run is over and its outcome known,
	// right before Done is closed (Pool: to follow the launcher's exit).
	afterDone func(*Process)
}
