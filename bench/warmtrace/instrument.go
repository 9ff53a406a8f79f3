package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// An edit inserts text before or after an anchor, which must occur in the
// file exactly once: when the code moves on, warmtrace fails naming the
// anchor rather than measuring something else.
type edit struct {
	file, anchor, before, after string
	alt                         string // the anchor in older revisions, tried when anchor is not there
	unless                      string // skip the edit when the file has this already
}

// stampGo is the server's side: a line "NS LABEL" per stamp, appended to
// $PYEXEC_TRACE (the copy only ever runs this benchmark).
const stampGo = `package engine

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

var warmtrace struct {
	sync.Mutex
	f *os.File
}

func warmtraceStamp(label string) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	warmtraceAt(ts.Nano(), label)
}

func warmtraceAt(ns int64, label string) {
	warmtrace.Lock()
	defer warmtrace.Unlock()
	if warmtrace.f == nil {
		warmtrace.f, _ = os.OpenFile(os.Getenv("PYEXEC_TRACE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	fmt.Fprintf(warmtrace.f, "%d %s\n", ns, label)
}
`

// stampPy is the fork server's side: G and S write {"kind":"t"} events on
// the run's status channel, which the server's reader turns into lines.
const stampPy = `def _t(os, fd, label):
    import time
    try:
        os.write(fd, ('{"kind":"t","error":"%s %d"}\n' % (label, time.monotonic_ns())).encode())
    except OSError:
        pass


`

var edits = []edit{
	// The interpreter, for revisions whose benchmark did not take one yet.
	{file: "internal/engine/warm_bench_linux_test.go", unless: "PYEXEC_BENCH_PYTHON",
		anchor: "Warm: WarmConfig{Spares: 2, wait: true}}", before: "Python: os.Getenv(\"PYEXEC_BENCH_PYTHON\"), "},

	// Server: the request, the fork server, its confinement, the handoff.
	{file: "internal/engine/engine.go", anchor: "\tp, err := e.prepare(ctx, &req, obs, x)\n",
		before: "\twarmtraceStamp(\"go.run\")\n\tdefer warmtraceStamp(\"go.return\")\n", after: "\twarmtraceStamp(\"go.prepared\")\n"},
	{file: "internal/engine/pool.go", anchor: "\tz, reason := w.acquire(p)\n", after: "\twarmtraceStamp(\"go.acquired\")\n"},
	{file: "internal/engine/pool.go", anchor: "\tw.warmRuns.Add(1)\n\tr, err := z.start(", before: "\twarmtraceStamp(\"go.boxed\")\n"},
	{file: "internal/engine/warmrun.go", anchor: "\trights := unix.UnixRights(fds...)\n", after: "\twarmtraceStamp(\"go.send\")\n"},
	{file: "internal/engine/warmrun.go", anchor: "\tline, gpid, err := sr.next()\n", after: "\twarmtraceStamp(\"go.started\")\n"},
	{file: "internal/engine/warmrun.go", anchor: "\t\tif json.Unmarshal(line, &ev) != nil {\n\t\t\tcontinue\n\t\t}\n",
		after: "\t\tif ev.Kind == \"t\" {\n\t\t\tvar ns int64\n\t\t\tvar label string\n\t\t\tfmt.Sscanf(ev.Error, \"%s %d\", &label, &ns)\n\t\t\twarmtraceAt(ns, \"py.\"+label)\n\t\t\tcontinue\n\t\t}\n\t\tif ev.Kind == launcher.EventExit {\n\t\t\twarmtraceStamp(\"go.exitev\")\n\t\t}\n"},
	{file: "internal/engine/warmrun.go", anchor: "\t// The zygote may take its next run now:", before: "\twarmtraceStamp(\"go.finished\")\n"},

	// Fork server: S forks G; G gets ready, takes the request, confines
	// itself, sets up, runs, finalizes and exits; S reaps it.
	{file: "internal/engine/driver.py", anchor: "def _note(os, fd, b):", before: stampPy},
	{file: "internal/engine/driver.py", anchor: "_hidden = []\n", after: "_TFD = -1\n_TFORK = 0\n"},
	{file: "internal/engine/driver.py", anchor: "    gpid = os.fork()\n    if gpid == 0:\n",
		before: "    import time as _time\n    global _TFORK\n    _TFORK = _time.monotonic_ns()\n"},
	{file: "internal/engine/driver.py", anchor: "    drop = [name for name in sys.modules if name not in keep]\n",
		before: "    import time as _time\n    _tg0 = _time.monotonic_ns()\n"},
	{file: "internal/engine/driver.py", anchor: "    try:\n        msg, anc, _, _ = ctlsock.recvmsg(",
		before: "    _tg1 = _time.monotonic_ns()\n"},
	{file: "internal/engine/driver.py", anchor: "    stdin, stdout, stderr, status = high[:4]\n",
		after: "    global _TFD\n    _TFD = status\n    _trecv = _time.monotonic_ns()\n"},
	{file: "internal/engine/driver.py", anchor: "    _emit(os, status, '{\"kind\":\"started\",\"pid\":%d,\"supervisor\":%d}\\n' % (os.getpid(), sup_pid))\n",
		after: "    for _l, _v in ((\"s.fork\", _TFORK), (\"g.born\", _tg0), (\"g.ready\", _tg1), (\"g.recv\", _trecv)):\n        _emit(os, status, '{\"kind\":\"t\",\"error\":\"%s %d\"}\\n' % (_l, _v))\n    _t(os, status, \"g.confined\")\n"},
	{file: "internal/engine/driver.py", anchor: "    os.closerange(3 + len(extra), 1 << 20)\n",
		before: "    os.closerange(3 + len(extra), _TFD)\n    os.closerange(_TFD + 1, 1 << 20)\n    if False:\n    "},
	{file: "internal/engine/driver.py", anchor: "    _fresh_stdio()\n", after: "    _t(os, _TFD, \"g.stdio\")\n"},
	{file: "internal/engine/driver.py", anchor: "        exec(compile(source, path, \"exec\", dont_inherit=True), main.__dict__)\n",
		before: "        _t(os, _TFD, \"g.exec\")\n", after: "        _t(os, _TFD, \"g.execd\")\n"},
	{file: "internal/engine/driver.py", anchor: "    _report_rusage()\n", alt: "    if kbi:\n        try:\n            signal.signal(signal.SIGINT, signal.SIG_DFL)\n",
		before: "    _t(os, _TFD, \"g.exit\")\n"},
	{file: "internal/engine/driver.py", anchor: "    signal.setitimer(signal.ITIMER_REAL, 0)\n    handover()\n",
		after: "    if st[\"status\"] >= 0:\n        _t(os, st[\"status\"], \"s.reaped\")\n"},
}

func instrument(src string) error {
	if err := os.WriteFile(filepath.Join(src, "internal/engine/zz_warmtrace.go"), []byte(stampGo), 0o644); err != nil {
		return err
	}
	for _, e := range edits {
		p := filepath.Join(src, e.file)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := string(data)
		if e.unless != "" && strings.Contains(text, e.unless) {
			continue
		}
		if e.alt != "" && !strings.Contains(text, e.anchor) {
			e.anchor = e.alt
		}
		if n := strings.Count(text, e.anchor); n != 1 {
			return fmt.Errorf("%s: anchor %q found %d times (the code moved on: update bench/warmtrace/instrument.go)", e.file, firstLine(e.anchor), n)
		}
		text = strings.Replace(text, e.anchor, e.before+e.anchor+e.after, 1)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimLeft(s, "\t "), "\n")
	return s
}
