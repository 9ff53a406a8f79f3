# pyexec warm driver: a fork server ("zygote") for one interpreter.
#
# Started by the engine through the per-run launcher as
#     python -u driver.py SPARES PRELOAD[;AUTO] [serial]
# with fd 0 a SOCK_SEQPACKET control socket shared with the server. It does
# the expensive part of a Python start once (interpreter init, site, optional
# preloaded modules), then keeps SPARES pre-forked runs ready. A ready run is a
# pair of processes forked from the zygote:
#
#   S, the supervisor: its own process group, a child subreaper, the parent of
#     G. It is the per-run launcher of the warm path (a port of
#     internal/launcher's supervise): it reaps every process of the run,
#     kills what is left when G exits, forwards TERM to the whole tree and
#     KILLs it after the grace period, and reports "exit" (with the tree's
#     rusage) on the run's status pipe, where G reported "started".
#   G, the run: waits on the control socket for ONE request, then becomes
#     `python -u FILE ARGS...` in CWD with ENV and the request's stdio, runs
#     FILE as __main__ and exits like the interpreter would.
#
# Each G serves exactly one run. The zygote forks a replacement pair as soon
# as one is taken, so forks stay off the request's critical path; for serial
# runs (a confined zygote serves one run at a time) S instead stays and forks
# the next G itself once the run is over (and cleaned up after): one fork per
# run instead of two, and no spare exists while a run does.
#
# PRELOAD (comma-separated) are the operator's --preload modules: one that
# fails to import fails the zygote. AUTO are the modules adaptive preload
# chose (see adaptive.go): each is imported on its own and timed, and one
# that fails or starts a thread fails the zygote with "auto MODULE: why",
# so that the server excludes it.
#
# Messages (fields joined by NUL; no field contains NUL):
#   zygote -> server, once:  READY, n, *sys.path[1:], *modules, *=AUTO=ms,
#                            %rss=bytes  or  FAIL, message
#   server -> G, per run:    RUN, cwd, file, grace_ms, box, nargs, *args, nenv, *env
#                            with SCM_RIGHTS [stdin, stdout, stderr, status,
#                            *cgroup files, ruleset?, *extra files]
#                            box = "ncgroup,ruleset,flags,cpu_seconds,clean,serial,watch"
#   G -> S (socketpair):     "T grace_ms clean serial" with SCM_RIGHTS [status];
#                            or E (EOF)
#   G -> S (shared memory):  after the run's code, "I" and the top-level
#                            modules it imported from site dirs, in a page S
#                            mapped before forking G (no descriptor the run
#                            could see); S checks them and reports "imports"
#                            before "exit"
#   G -> zygote (pipe):      "T<pid>\n" a spare was taken (not for serial runs),
#                            "E<pid>\n" EOF
#   S -> zygote (pipe):      "D<pid>\n" what a run left could not be removed:
#                            stop serving
#   S -> server (status):    JSON lines like internal/launcher's Event; the
#                            status channel is a socket, so the server learns
#                            G's pid in its own PID namespace from the kernel
#                            (the pids these lines carry are this zygote's).
#
# Confinement. The zygote was started by the launcher under the runs'
# sandbox (run-as user, namespaces, seccomp, rlimits, an outer Landlock
# layer), which every fork inherits. Per run, before anything else, G joins
# the run's cgroup (writing "0" to the cgroup files the server opened),
# lowers RLIMIT_CPU and stacks the run's own Landlock ruleset (built by the
# server) with landlock_restrict_self. A serial zygote's S stacks, once, a
# seccomp filter that every G it forks inherits, under which the pids of
# this PID namespace that are not a run's (its init, the zygote and its
# threads, S) cannot be named to
# prlimit, setpriority, sched_setaffinity, sched_set{scheduler,param,attr}
# or ioprio_set, nor can a process group or a whole uid (PRIO_PGRP,
# PRIO_USER and their ioprio_set forms; a run is in S's group): the run
# shares the zygote's uid, and what it changed there every later run
# would inherit (signals, ptrace and /proc/PID of them Landlock refuses
# already, and /proc does not list them). If any step fails, G reports an
# error and exits without running anything; the server then starts the run
# cold.
#
# The runs of a confined zygote share its /dev/shm and IPC namespace, one
# run at a time. With clean, S reports the run's exit, then empties both
# (every file in /dev/shm at any depth; every SysV segment, semaphore and
# message queue; every POSIX message queue), checks they are empty, and
# reports "clean", or "dirty" and why. Only then does S fork the next G,
# which reads the next request (the server may have sent it meanwhile: it
# waits in the socket); after "dirty" S tells the zygote to stop instead,
# and the server retires it.
import sys

_startup_modules = set(sys.modules)
import os  # noqa: E402 - always loaded at startup; imported after the snapshot on purpose


def _zygote():
    global _PROC, _MQUEUE, _SERIAL
    spares = max(1, int(sys.argv[1]))
    operator, _, auto = sys.argv[2].partition(";")
    preload = [m for m in operator.split(",") if m]
    auto = [m for m in auto.split(",") if m]
    _SERIAL = len(sys.argv) > 3 and sys.argv[3] == "serial"
    # The supervisors' view of the zygote's namespaces, when the launcher
    # made one in its temp dir (see the header and sandbox/namespaces.go).
    mine = os.path.join(os.environ.get("TMPDIR", "/nonexistent"), ".supervisor")
    if os.path.isdir(os.path.join(mine, "proc", "self")):
        _PROC = os.path.join(mine, "proc")
    _MQUEUE = os.path.join(mine, "mqueue")

    ctl = os.dup(0)  # non-inheritable; children reach it through fork only
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    import _socket

    ctlsock = _socket.socket(fileno=ctl)

    def send(fields):
        ctlsock.send(b"\0".join(fields))

    before = set(sys.modules)
    try:
        for m in preload:
            __import__(m)
    except BaseException as e:  # noqa: BLE001 - report anything, then quit
        send([b"FAIL", ("preload %s: %s: %s" % (m, type(e).__name__, e)).encode("utf-8", "replace")])
        os._exit(3)
    costs = _auto_preload(auto, send)
    keep = _startup_modules | (set(sys.modules) - before)
    global _rt
    _rt = _load_rt()
    if _rt is not None and any(m == "matplotlib" or m.startswith("matplotlib.") or m == "IPython" or m.startswith("IPython.") for m in list(preload) + auto):
        try:
            _rt._load("pyexec_display")  # runs patch the preloaded modules at once: compile it once here
        except Exception:  # noqa: BLE001 - loaded per run instead
            pass

    import gc
    import atexit
    import signal
    import fcntl
    import resource  # os.wait4's rusage in S, and G's own as it exits (_report_rusage)
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36

    notify_r, notify_w = os.pipe()
    os.set_blocking(notify_w, False)
    # A SIGCHLD writes a byte into the notify pipe, waking the loop below.
    signal.signal(signal.SIGCHLD, lambda *a: None)
    signal.set_wakeup_fd(notify_w)

    gc.collect()
    gc.freeze()  # collections in the children never walk (and copy) our heap
    global _GC, _ATEXIT, _RESOURCE
    _GC, _ATEXIT, _RESOURCE = gc, atexit, resource  # a run's teardown uses them without importing (G drops the driver's modules)

    # What its serial runs may not name (see _protect): the zygote and its
    # threads (a preloaded library may have started some).
    global _FORK_SERVER_PIDS
    try:
        _FORK_SERVER_PIDS = sorted(int(t) for t in os.listdir("/proc/self/task"))
    except (OSError, ValueError):
        _FORK_SERVER_PIDS = [os.getpid()]

    # sys.path (to notice installs), then the top-level modules a run finds
    # imported (a PYTHONPATH directory must not shadow one of them).
    tops = sorted({name.partition(".")[0] for name in keep})
    # sys.path[0] is the driver's own directory, not one a run imports from.
    _site_dirs(keep)
    send([b"READY", b"%d" % (len(sys.path) - 1)] + [os.fsencode(p) for p in sys.path[1:]] + [t.encode() for t in tops]
         + [("=%s=%.3f" % mc).encode() for mc in costs] + [b"%%rss=%d" % _rss()])

    live = set()  # spare supervisors not taken yet
    eof = False
    while True:
        while not eof and len(live) < spares:
            pid = os.fork()
            if pid == 0:
                # A fork must never fall back into this loop (it would become a
                # second zygote): whatever happens, it ends here.
                try:
                    _spare(os, signal, _socket, ctl, ctlsock, notify_r, notify_w, libc, PR_SET_CHILD_SUBREAPER, keep)
                except BaseException:  # noqa: BLE001
                    _die()
                _die()
            live.add(pid)
        if eof:
            break
        try:
            data = os.read(notify_r, 4096)
        except InterruptedError:
            data = b""
        for line in data.split(b"\n"):
            line = line.strip(b"\x00" + bytes([signal.SIGCHLD]))
            if line[:1] in (b"T", b"E", b"D") and line[1:].isdigit():
                live.discard(int(line[1:]))
                if line[:1] in (b"E", b"D"):
                    eof = True
        while True:  # reap finished supervisors
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            live.discard(pid)  # a spare that died unused is replaced
    # The server closed the control socket: let running runs finish, then go.
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctlsock.detach()
    os.close(ctl)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    os._exit(0)


def _spare(os, signal, _socket, ctl, ctlsock, notify_r, notify_w, libc, PR_SET_CHILD_SUBREAPER, keep):
    """The supervisor S of one future run (in the zygote's fork)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(notify_r)
    os.setpgid(0, 0)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.write(2, b"pyexec warm driver: PR_SET_CHILD_SUBREAPER failed\n")
        os._exit(71)
    if _SERIAL:
        # Once for every run this S serves: each G it forks inherits it.
        _protect(libc, [1, os.getpid()] + _FORK_SERVER_PIDS)

    # The run's tree is walked in the supervisors' /proc (the zygote's PID
    # namespace without hidepid, which the run cannot reach: see
    # sandbox.SupervisorDir), else in /proc, whose pids are those of the
    # PID namespace it was mounted in: S finds itself as /proc sees it and
    # signals each descendant by its pid in S's namespace (the last NSpid
    # field).
    me_local = os.getpid()
    try:
        me = int(os.readlink(_PROC + "/self"))
    except (OSError, ValueError):
        me = me_local
    global _ME
    _ME = me
    _exit_watch_setup(libc)
    if _EXIT_ADDR is not None:
        # A child's end interrupts the exit watch's futex wait (the handler
        # itself does nothing; Python installs it without SA_RESTART).
        signal.signal(signal.SIGCHLD, lambda *a: None)
    st = {"handover": lambda: None, "taken": False, "term": False, "grace": 0.5}

    def tree(sig):
        for pid in _descendants(os, me):
            local = _local_pid(os, pid)
            try:
                if local:
                    os.kill(local, sig)
            except OSError:
                pass

    def on_term(*_):
        st["handover"]()  # for the run's grace period
        if st["taken"] and not st["term"]:  # before its run there is nothing to end
            st["term"] = True
            tree(signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, st["grace"])

    def on_alarm(*_):
        tree(signal.SIGKILL)
        signal.setitimer(signal.ITIMER_REAL, st["grace"])  # keep sweeping late forks

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_term)
    signal.signal(signal.SIGALRM, on_alarm)
    # One run per G. For serial runs (a zygote serving one run at a time) S
    # stays and forks the next G once the run is over, so that a run costs
    # one fork instead of two; otherwise it exits after the run.
    g = _fork_g(os, signal, _socket, ctl, ctlsock, notify_w, libc, keep, False, -1)
    while g is not None:
        g = _supervise(os, signal, _socket, ctl, ctlsock, notify_w, libc, keep, st, tree, g)
    os._exit(0)


def _fork_g(os, signal, _socket, ctl, ctlsock, notify_w, libc, keep, gated, inherited):
    """S: fork the G of the next run; return (its pid, S's end of their
    socketpair). A gated G takes no request before S sends it "G" (once
    what the last run left is removed), and exits unused on EOF. inherited
    is the last run's status channel, which G must not keep."""
    mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    _clear_report()
    _disarm_exit_watch()
    gpid = os.fork()
    if gpid == 0:
        try:
            _register_exit_watch(libc)
            mine.close()
            if inherited >= 0:
                os.close(inherited)
            _child(os, signal, _socket, ctl, ctlsock, notify_w, theirs, keep, libc, gated)
        except BaseException:  # noqa: BLE001
            _die()
        _die()
    theirs.close()
    _arm_exit_watch(gpid)
    return gpid, mine


def _supervise(os, signal, _socket, ctl, ctlsock, notify_w, libc, keep, st, tree, g):
    """Supervise G's run to the end and report it; return the next run's G
    when S is to serve another run, else None."""
    st.clear()
    st.update({"term": False, "grace": 0.5, "taken": False, "status": -1, "clean": False, "serial": False, "watch": False,
               "handover": lambda: None})
    gpid, mine = g

    # S sleeps in wait4 through the whole run: G's handover (the status pipe
    # and the grace period) waits in the socket until S needs it, so no
    # wakeup of S sits on the request's path.
    mine.setblocking(False)

    def handover():
        if st["taken"]:
            return
        try:
            msg, anc, _, _ = mine.recvmsg(64, _socket.CMSG_SPACE(4 * 4))
        except OSError:
            return
        st["taken"] = True
        fds = _fds(anc)
        if msg[:1] == b"T" and fds:
            st["status"] = fds.pop(0)
            f = msg[2:].split()
            try:
                st["grace"] = max(0.001, int(f[0]) / 1000.0)
                st["clean"] = f[1] == b"1"
                st["serial"] = f[2] == b"1"
                st["watch"] = f[3] == b"1"
            except (ValueError, IndexError):
                pass
        for fd in fds:
            os.close(fd)

    st["handover"] = handover
    main = None
    # The run's rusage, as a launcher's RUSAGE_CHILDREN would give it: CPU
    # summed over every reaped process, the largest resident set of any.
    utime = stime = 0.0
    maxrss = 0
    # While G lives and the exit watch holds, S waits on it rather than in
    # wait4: the kernel wakes S when G starts to exit, before it frees its
    # address space (which takes longer than anything else after a short
    # run), and S reports the run over then if nothing of it can run any
    # more (see _dying). Anything unexpected, and S waits in wait4 as ever.
    watch = _EXIT_ADDR is not None
    early = None
    while True:
        if watch and main is None:
            word = _exit_word()
            if word == _FUTEX_WAITERS | _FUTEX_OWNER_DIED:
                # G's main thread has ended (the kernel keeps FUTEX_WAITERS
                # and sets FUTEX_OWNER_DIED in place of the tid).
                early = _dying(os, gpid)
                if early is not None:
                    break
                watch = False  # G exec'd, or a thread of it lives on: wait4 from now on
                continue
            if word != gpid | _FUTEX_WAITERS:
                watch = False  # the run changed the word
                continue
            try:
                pid, ws, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if not _futex_wait(libc, word):  # woken by G's exit, a signal (SIGCHLD, TERM) or 200 ms later
                    # 200 ms into the run: G's handover is in by now. A
                    # session's process (no watch) is waited for in wait4
                    # from now on, as before the watch existed.
                    handover()
                    watch = st["taken"] and st["watch"]
                continue
        else:
            try:
                pid, ws, ru = os.wait4(-1, 0)
            except ChildProcessError:
                break
        utime += ru.ru_utime
        stime += ru.ru_stime
        maxrss = max(maxrss, ru.ru_maxrss)
        if pid == gpid:
            main = ws
        if main is not None:
            try:
                # Any child left? (A subreaper with no children has no
                # descendants: nothing of the run is left to sweep.)
                os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            tree(signal.SIGKILL)  # leftovers (daemons, setsid grandchildren) end with the run
    signal.setitimer(signal.ITIMER_REAL, 0)
    handover()
    mine.close()
    imports = _read_imports() if st["taken"] else None
    if early is not None:
        main, u, s_, rss = early
        utime, stime, maxrss = utime + u, stime + s_, max(maxrss, rss)
    status = st["status"]
    if status < 0:
        if early is not None:
            _reap(os, gpid)
        return None  # a spare that never ran (EOF, or killed)
    if imports:
        _emit(os, status, '{"kind":"imports","modules":[%s]}\n' % ",".join('"%s"' % m for m in imports))
    code, sig = 0, 0
    if main is not None:
        if os.WIFEXITED(main):
            code = os.WEXITSTATUS(main)
        elif os.WIFSIGNALED(main):
            sig = os.WTERMSIG(main)
            code = -sig
    _emit(os, status, '{"kind":"exit","exit_code":%d,"signal":%d,"user_seconds":%.6f,"system_seconds":%.6f,"max_rss_bytes":%d,"early":%d}\n'
          % (code, sig, utime, stime, maxrss * 1024, early is not None))
    nxt = None
    if st["serial"]:
        # The next run's G is forked now, while the server reads the result
        # and prepares the next request, so that the fork and G's rehearsal
        # are off that request's clock. It takes no request before what
        # this run left is removed below.
        nxt = _fork_g(os, signal, _socket, ctl, ctlsock, notify_w, libc, keep, st["clean"], status)
    if early is not None and (not st["clean"] or _shared_left(os, libc)):
        # G is still freeing its memory, and detaching SysV segments, which
        # the clean-up below must find gone: wait for its end first. (When
        # the run left nothing there, G, which runs nothing any more, is
        # reaped after the next G may go.)
        _reap(os, gpid)
        early = None
    if st["clean"]:
        import json

        try:
            problem = _cleanup(os, libc)
        except BaseException as e:  # noqa: BLE001 - reported: the server retires the zygote
            problem = "%s: %s" % (type(e).__name__, e)
        if problem:
            _emit(os, status, '{"kind":"dirty","error":%s}\n' % json.dumps(problem))
            # Nothing more may run here: the zygote stops forking (a request
            # already queued for the next run then reaches nobody, and the
            # server starts it cold). The next G ends unused on EOF.
            _note(os, notify_w, b"D%d\n" % os.getpid())
            if nxt is not None:
                nxt[1].close()
                _reap(os, nxt[0])
            nxt = None
        else:
            _emit(os, status, '{"kind":"clean"}\n')
            if nxt is not None:
                try:
                    nxt[1].send(b"G")
                except OSError:
                    pass  # G died: S sees it in wait4 as a spare that never ran
    os.close(status)
    if early is not None:
        _reap(os, gpid)  # before the next run's wait4(-1) could take it for one of that run's processes
    return nxt


def _shared_left(os, libc):
    """Does /dev/shm, SysV IPC or the message queue filesystem hold
    anything? (What _cleanup looks at first; a SysV segment a dying
    process still has attached counts, even once removed.)"""
    if os.listdir("/dev/shm"):
        return True
    for kind in ("shm", "sem", "msg"):
        if _ipc_count(libc, kind):
            return True
    try:
        return bool(os.listdir(_MQUEUE))
    except OSError:
        return True


def _reap(os, pid):
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _cleanup(os, libc):
    """Remove what a run left in what the zygote's runs share (run by S, as
    the run's uid, once every process of the run is gone); return what could
    not be removed, or None. Found nothing (the common case: five system
    calls): nothing to check again."""
    problems = []
    found = 0
    if os.listdir("/dev/shm"):
        found += 1
        try:
            _empty_dir(os, "/dev/shm")
        except OSError as e:
            problems.append("/dev/shm: %s" % e)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, 0, None)),
                         ("sem", lambda i: libc.semctl(i, 0, 0)),
                         ("msg", lambda i: libc.msgctl(i, 0, None))):
        if not _ipc_count(libc, kind):
            continue
        for ident in _ipc_ids(os, kind):
            found += 1
            if remove(ident) != 0:
                import ctypes

                problems.append("SysV %s %d: %s" % (kind, ident, os.strerror(ctypes.get_errno())))
    try:
        queues = os.listdir(_MQUEUE)
    except OSError as e:
        return "no message queue filesystem to check: %s" % e
    for name in queues:
        found += 1
        try:
            os.unlink(os.path.join(_MQUEUE, name))
        except OSError as e:
            problems.append("POSIX message queue %s: %s" % (name, e))
    if not found:
        return None
    # What is left, whatever the steps above said.
    left = os.listdir("/dev/shm")
    if left:
        problems.append("/dev/shm still holds %d entries" % len(left))
    for kind in ("shm", "sem", "msg"):
        n = _ipc_count(libc, kind)
        if n:
            problems.append("%d SysV %s objects left" % (n, kind))
    if os.listdir(_MQUEUE):
        problems.append("POSIX message queues left")
    return "; ".join(problems) or None


def _ipc_count(libc, kind):
    """How many SysV IPC objects of kind this IPC namespace holds (one
    *_INFO call); -1 when the kernel does not say."""
    import ctypes

    buf = (ctypes.c_int * 32)()
    if kind == "shm":  # SHM_INFO: struct shm_info starts with used_ids
        r, n = libc.shmctl(0, 14, buf), buf[0]
    elif kind == "sem":  # SEM_INFO: struct seminfo's semusz (sets in use)
        r, n = libc.semctl(0, 0, 19, buf), buf[7]
    else:  # MSG_INFO: struct msginfo's msgpool (queues in use)
        r, n = libc.msgctl(0, 12, buf), buf[0]
    return n if r >= 0 else -1


def _ipc_ids(os, kind):
    """The ids of the SysV IPC objects of this IPC namespace."""
    with open("/proc/sysvipc/" + kind, "rb") as f:
        lines = f.read().splitlines()[1:]
    return [int(line.split()[1]) for line in lines if line.strip()]


def _empty_dir(os, top):
    """Remove everything below top, whatever its depth (directory fds and
    "..", never a path, so no PATH_MAX and no recursion), permissions (the
    run's files are S's own: unreadable directories are made readable) or
    kind; symlinks are removed, never followed."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(top, flags)
    pending = [None]  # per level: (name, is_dir) left to visit in that directory
    try:
        while True:
            if pending[-1] is None:
                with os.scandir(fd) as it:
                    pending[-1] = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            descend = None
            names = pending[-1]
            while names:
                name, is_dir = names.pop()
                if not is_dir:
                    try:
                        os.unlink(name, dir_fd=fd)
                    except FileNotFoundError:
                        pass
                    except IsADirectoryError:
                        names.append((name, True))
                    continue
                try:
                    os.rmdir(name, dir_fd=fd)
                    continue
                except FileNotFoundError:
                    continue
                except OSError:
                    pass
                os.chmod(name, 0o700, dir_fd=fd)
                descend = name
                break
            if descend is not None:
                child = os.open(descend, flags, dir_fd=fd)
                names.append((descend, True))  # removed once empty, on the way back
                os.close(fd)
                fd = child
                pending.append(None)
                continue
            if len(pending) == 1:
                return
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            pending.pop()
    finally:
        os.close(fd)


def _confine(os, libc, cgroups, ruleset, flags, cpu):
    """The run's own confinement (see the header), applied to this process
    before the run starts; raises OSError when a step fails."""
    for fd in cgroups:
        os.write(fd, b"0")  # join the run's cgroup: this process and all it forks
        os.close(fd)
    if cpu > 0:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL, as cold
    if ruleset >= 0:
        import ctypes

        # landlock_restrict_self(ruleset_fd, flags): 446 on every
        # architecture with the generic syscall table (x86-64, arm64, ...).
        if libc.syscall(ctypes.c_long(446), ctypes.c_int(ruleset), ctypes.c_uint32(flags)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "landlock_restrict_self: " + os.strerror(err))
        os.close(ruleset)


# The calls that change another process of the same uid by pid, and the
# arguments that name it, for the seccomp layer of serial runs (_protect):
# (syscall numbers on x86_64, on arm64; index of the pid argument, or of
# the "which" argument whose values name a pid, a group or a uid).
_PID_CALLS = {
    "prlimit64": ((302, 261), 0),
    "sched_setaffinity": ((203, 122), 0),
    "sched_setscheduler": ((144, 119), 0),
    "sched_setparam": ((142, 118), 0),
    "sched_setattr": ((314, 274), 0),
}
_WHICH_CALLS = {  # (numbers), which for a pid (who is then argument 1), which for a group, for a uid
    "setpriority": ((141, 140), 0, 1, 2),  # PRIO_PROCESS, PRIO_PGRP, PRIO_USER
    "ioprio_set": ((251, 30), 1, 2, 3),  # IOPRIO_WHO_PROCESS, _PGRP, _USER
}
_AUDIT_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}


def _protect(libc, pids):
    """Stack a seccomp filter on this process (and all it forks) under which
    the calls above fail with EPERM when they name one of pids, or a whole
    uid. The zygote's own filter (the launcher's) stays below it."""
    import ctypes
    import struct

    arch, col = _AUDIT_ARCH[os.uname().machine]
    LD, JEQ, RET = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    ALLOW, EPERM = 0x7FFF0000, 0x00050000 | 1
    prog = []  # [code, jt, jf, k], with "jt"/"jf" given as labels first

    def ins(code, k, jt=0, jf=0):
        prog.append([code, jt, jf, k])

    def arg(i):
        return 16 + 8 * i

    deny_pids = "deny_pids"
    ins(LD, 4)
    ins(JEQ, arch, 1, 0)
    ins(RET, ALLOW)  # another architecture: the launcher's filter refuses everything
    ins(LD, 0)
    for name, (nrs, a) in _PID_CALLS.items():
        ins(JEQ, nrs[col], ("pid", a), 0)
    for name, (nrs, pid_which, group_which, user_which) in _WHICH_CALLS.items():
        ins(JEQ, nrs[col], ("which", name), 0)
    ins(RET, ALLOW)
    labels = {}  # (BPF jumps only forward: each target comes after its jumps)
    for name, (nrs, pid_which, group_which, user_which) in _WHICH_CALLS.items():
        # A process group: the run's own is S's (and a uid: the zygote's).
        labels[("which", name)] = len(prog)
        ins(LD, arg(0))
        ins(JEQ, user_which, "eperm", 0)
        ins(JEQ, group_which, "eperm", 0)
        ins(JEQ, pid_which, ("pid", 1), 0)
        ins(RET, ALLOW)
    for a in sorted({a for _, a in _PID_CALLS.values()} | {1}):
        labels[("pid", a)] = len(prog)
        ins(LD, arg(a))
        ins(0x05, deny_pids)  # BPF_JMP|BPF_JA to the pid checks
    labels[deny_pids] = len(prog)
    for p in pids:
        ins(JEQ, p, "eperm", 0)
    ins(RET, ALLOW)
    labels["eperm"] = len(prog)
    ins(RET, EPERM)
    raw = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        if code == 0x05:  # BPF_JA: k is the offset
            k, jt, jf = labels[k] - i - 1, 0, 0
        jt = labels[jt] - i - 1 if not isinstance(jt, int) else jt
        jf = labels[jf] - i - 1 if not isinstance(jf, int) else jf
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise OSError(0, "seccomp layer: jump too far")
        raw += struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)
    buf = ctypes.create_string_buffer(raw, len(raw))
    n = len(raw) // 8

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(n, ctypes.addressof(buf))
    # prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog): no_new_privs is set.
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "seccomp layer: " + os.strerror(err))


def _die():
    """End a fork whose driver code failed (never the script: _run handles
    that and always exits itself)."""
    try:
        import traceback

        if sys.exc_info()[0] is not None:
            os.write(2, ("pyexec warm driver: " + traceback.format_exc()).encode("utf-8", "replace"))
    finally:
        os._exit(70)


def _descendants(os, root):
    out, queue = [], [root]
    while queue:
        pid = queue.pop()
        try:
            tasks = os.listdir(_PROC + "/%d/task" % pid)
        except OSError:
            continue
        for t in tasks:
            try:
                fd = os.open(_PROC + "/%d/task/%s/children" % (pid, t), os.O_RDONLY)
            except OSError:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                data = b""
            finally:
                os.close(fd)
            for c in data.split():
                out.append(int(c))
                queue.append(int(c))
    return out


def _local_pid(os, pid):
    """pid (as /proc names it) in this process's PID namespace; None when it
    is gone."""
    try:
        fd = os.open(_PROC + "/%d/status" % pid, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    for line in data.split(b"\n"):
        if line.startswith(b"NSpid:"):
            return int(line.split()[-1])
    return None


def _fds(anc):
    fds = []
    for level, kind, data in anc:
        if level == 1 and kind == 1:  # SOL_SOCKET, SCM_RIGHTS
            n = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, n, 4)]
    return fds


def _note(os, fd, b):
    try:
        os.write(fd, b)
    except OSError:
        pass


def _emit(os, fd, line):
    try:
        os.write(fd, line.encode())
    except OSError:
        pass


def _child(os, signal, _socket, ctl, ctlsock, notify_w, sup, keep, libc, gated):
    """G: wait for one request, then become `python -u FILE ARGS...`."""
    global _inherited
    _inherited = keep
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    drop = [name for name in sys.modules if name not in keep]
    try:
        ctlsock.recv(1, _socket.MSG_PEEK | _socket.MSG_DONTWAIT)
        late = True  # a request waits already: its run takes the faults a rehearsal would
    except OSError:
        late = False
    if not late:
        _rehearse()
    # The zygote's environment goes now, before any request: the run gets
    # exactly the request's (see below).
    environb = os.environb
    zygote_env = environb.get(b"TZ"), environb.get(b"HOME"), environb.get(b"PYTHONPATH")
    data = os.environ._data
    for k in list(data):
        os.unsetenv(k)
    data.clear()
    if gated:
        try:
            go = sup.recv(1)
        except OSError:
            go = b""
        if go != b"G":
            os._exit(0)  # what the last run left could not be removed: no run here
    try:
        msg, anc, _, _ = ctlsock.recvmsg(1 << 17, _socket.CMSG_SPACE(4 * (4 + _MAX_BOX + _MAX_EXTRA)))
    except OSError:
        msg, anc = b"", []
    fds = _fds(anc)
    f = msg.split(b"\0")
    sup_pid = os.getppid()
    if f[0] != b"RUN" or len(fds) < 4:
        # EOF: the server closed the control socket; the zygote winds down.
        for fd in fds:
            os.close(fd)
        _note(os, notify_w, b"E%d\n" % sup_pid)
        os._exit(0)
    # Out of the way of the numbers they are going to take (0-2, 3+ for the
    # extra files).
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
    for fd in fds:
        os.close(fd)
    stdin, stdout, stderr, status = high[:4]
    ncg, has_ruleset, flags, cpu, clean, serial, watch = [int(x) for x in f[4].split(b",")]
    cgroups = high[4:4 + ncg]
    ruleset = high[4 + ncg] if has_ruleset else -1
    extra = high[4 + ncg + has_ruleset:]
    try:
        _confine(os, libc, cgroups, ruleset, flags, cpu)
        # The server made sure both exist: if this mount namespace does not
        # show them, it is not the one a cold run would get.
        os.stat(f[2])
        os.stat(f[1])
    except BaseException as e:  # noqa: BLE001 - nothing of the run has started
        import json

        _emit(os, status, '{"kind":"error","exit_code":127,"error":%s}\n' % json.dumps("warm confinement: %s" % e))
        os._exit(0)  # S sees no handover and exits quietly; the run starts cold
    try:
        if not watch:
            _unregister_exit_watch(libc)  # a session's process: it stays as a cold one would be
        sup.sendmsg([b"T %s %d %d %d" % (f[3], clean, serial, watch)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, status.to_bytes(4, sys.byteorder))])
    except OSError:
        os._exit(0)  # no supervisor, no run: the server sees EOF and goes cold
    _emit(os, status, '{"kind":"started","pid":%d,"supervisor":%d}\n' % (os.getpid(), sup_pid))
    if not serial:
        _note(os, notify_w, b"T%d\n" % sup_pid)  # the zygote forks the next spare
    os.close(notify_w)
    sup.close()
    ctlsock.detach()

    cwd, path = os.fsdecode(f[1]), os.fsdecode(f[2])
    nargs = int(f[5])
    args = [os.fsdecode(a) for a in f[6:6 + nargs]]
    nenv = int(f[6 + nargs])
    env = f[7 + nargs:7 + nargs + nenv]
    try:
        os.chdir(cwd)
    except OSError as e:
        import json

        err = "start %s: chdir %s: %s" % (sys.executable, cwd, e.strerror or e)
        _emit(os, status, '{"kind":"error","exit_code":127,"error":%s}\n' % json.dumps(err))
        os._exit(127)
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for i, fd in enumerate(extra):
        os.dup2(fd, 3 + i)  # inheritable, as the launcher passes them
    os.closerange(3 + len(extra), 1 << 20)

    # The environment, as execve would have set it.
    # What environb.clear() (done before the request) and item assignment
    # do (unsetenv/putenv plus the mapping both os.environ and os.environb
    # share), without their per-item overhead.
    tz, home, zygote_pythonpath = zygote_env
    for kv in env:
        k, _, v = kv.partition(b"=")
        os.putenv(k, v)
        data[k] = v
    if "time" in sys.modules and environb.get(b"TZ") != tz:
        sys.modules["time"].tzset()  # TZ from the new environment
    if "site" in sys.modules and environb.get(b"HOME") != home:
        # The user base and site dir follow HOME (the server checked that
        # neither HOME has a user site that startup would have added).
        sys.modules["site"].USER_BASE = None
        sys.modules["site"].USER_SITE = None
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # TMPDIR from the new environment

    # Modules the driver imported for itself are not the script's. They stay
    # referenced here: freeing them would only copy the pages they live on.
    for name in drop:
        _hidden.append(sys.modules.pop(name, None))
    _hidden.append(sys.path_importer_cache)
    sys.path_importer_cache = {}  # directories are listed afresh, as at startup

    # sys as `python -u FILE ARGS...` sets it.
    sys.argv = [path] + args
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [sys.executable, "-u", path] + args
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    pythonpath = environb.get(b"PYTHONPATH")
    if pythonpath and not zygote_pythonpath:
        # As startup does: each entry made absolute (from the run's cwd),
        # placed after the script's directory, and site's removeduppaths.
        # (The server checked that no entry shadows a module the zygote
        # imported at startup, or holds a sitecustomize.)
        seen, rest = set(), []
        for d in [os.path.abspath(os.fsdecode(e)) for e in pythonpath.split(b":")] + sys.path[1:]:
            if d not in seen:
                seen.add(d)
                rest.append(d)
        sys.path[1:] = rest
    _fresh_stdio()

    import builtins

    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__builtins__ = builtins
    main.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    del builtins, f, env, msg, anc, fds
    if _rt is not None:
        try:
            _rt.install()  # display and error hooks, as sitecustomize installs them cold
        except Exception:  # noqa: BLE001 - never break the run
            pass
        if "sitecustomize" not in sys.modules:  # cold runs import pyexec's
            sys.modules["sitecustomize"] = type(sys)("sitecustomize")
    # What G made since the fork is not the run's garbage either: the run's
    # collections (and its teardown's) walk only the objects the run makes.
    _GC.freeze()
    _run(os, signal, main, path)


def _rehearse():
    """While waiting, walk the paths a run takes (compile, exec, print, the
    stdio constructors) so the pages they touch are faulted in and copied
    now rather than on the request's clock. Nothing of it is visible to the
    run. (Skipped when a request is waiting already: a rehearsal then only
    delays it.)"""
    import io

    try:
        null = io.open(os.devnull, "wb", buffering=0)
        out = io.TextIOWrapper(null, encoding="utf-8", write_through=True)
        code = compile(b"import sys\nprint('x', [str(i) for i in range(3)], file=out)\n", "<rehearsal>", "exec", dont_inherit=True)
        exec(code, {"__builtins__": __builtins__, "out": out})
        out.close()
        os.environb.get(b"PATH")
        os.path.realpath(sys.executable)
        threading = sys.modules.get("threading")
        if threading is not None:  # what _shutdown() will touch
            threading._enumerate()
            threading.main_thread()
    except Exception:  # noqa: BLE001 - only an optimisation
        pass


_hidden = []
_ME = 0  # S's pid as _PROC names it
_GC = None  # the zygote's gc and atexit modules (see _finalize)
_ATEXIT = None
_RESOURCE = None
_REPORT = None  # the page G reports its imports in (S's; see _clear_report)
_SITE_DIRS = ()  # the zygote's sys.path directories that are not the standard library
_rt = None  # pyexec_rt (display and error hooks), loaded once by the zygote


def _load_rt():
    """Load pyexec_rt.py from PYEXEC_RT_DIR without putting it in sys.modules
    (a run must not find it there)."""
    d = os.environ.get("PYEXEC_RT_DIR")
    if not d:
        return None
    path = os.path.join(d, "pyexec_rt.py")
    try:
        with open(path, "rb") as f:
            src = f.read()
        m = type(sys)("pyexec_rt")
        m.__file__ = path
        exec(compile(src, path, "exec"), m.__dict__)
        return m
    except Exception:  # noqa: BLE001 - runs go without the hooks
        return None


_FORK_SERVER_PIDS = []  # the zygote's pid and threads (set before READY)
_SERIAL = False  # it serves one run at a time (argv[3] == "serial")
_PROC = "/proc"
_MQUEUE = "/dev/mqueue"
_MAX_EXTRA = 4  # extra files (fd 3, 4, ...) a run may inherit; pool.go agrees
_MAX_BOX = 3  # confinement files: two cgroup files and a Landlock ruleset


def _fresh_stdio():
    """New sys.std* objects on fds 0-2, built as interpreter startup does, so
    that nothing (buffers, seekability, names) carries over from the zygote."""
    import io

    for fd, name, attr in ((0, "<stdin>", "stdin"), (1, "<stdout>", "stdout"), (2, "<stderr>", "stderr")):
        old = getattr(sys, "__%s__" % attr)
        write = fd != 0
        unbuffered = write and old.write_through
        buf = io.open(fd, "wb" if write else "rb", buffering=0 if unbuffered else -1, closefd=False)
        raw = buf if unbuffered else buf.raw
        raw.name = name
        stream = io.TextIOWrapper(buf, encoding=old.encoding, errors=old.errors, newline="\n",
                                  line_buffering=old.line_buffering, write_through=old.write_through)
        stream.mode = "w" if write else "r"
        setattr(sys, attr, stream)
        setattr(sys, "__%s__" % attr, stream)


def _run(os, signal, main, path):
    code, kbi = 0, False
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        if b"\0" in source:  # as the file tokenizer reports it
            head = source[:source.index(b"\0")]
            line = head.count(b"\n") + 1
            text = head[head.rfind(b"\n") + 1:].decode("utf-8", "replace")
            raise SyntaxError("source code cannot contain null bytes", (path, line, 0, text, line, 0))
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException as e:  # noqa: BLE001 - the interpreter's own handling
        kbi = isinstance(e, KeyboardInterrupt)
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        e.__traceback__ = tb
        _print_exc(type(e), e, tb)
        code = 1
        del e, tb
    _finalize(os, signal, code, kbi)


def _exit_code(e):
    value = e.code
    if value is None:
        return 0
    if isinstance(value, int):
        if -(1 << 63) <= value < (1 << 63):
            return ((value + (1 << 31)) % (1 << 32)) - (1 << 31)
        return -1
    err = getattr(sys, "stderr", None)
    try:
        if err is not None:
            err.write(str(value))
            err.write("\n")
        else:
            os.write(2, (str(value) + "\n").encode())
    except BaseException:  # noqa: BLE001
        pass
    return 1


def _print_exc(t, v, tb):
    """PyErr_Print: sys.last_*, then sys.excepthook."""
    sys.last_type, sys.last_value, sys.last_traceback = t, v, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = v
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        sys.__excepthook__(t, v, tb)
        return
    try:
        hook(t, v, tb)
    except BaseException as e2:  # noqa: BLE001
        err = sys.stderr
        try:
            err.write("Error in sys.excepthook:\n")
            sys.__excepthook__(type(e2), e2, e2.__traceback__)
            err.write("\nOriginal exception was:\n")
            sys.__excepthook__(t, v, tb)
        except BaseException:  # noqa: BLE001
            pass


def _finalize(os, signal, code, kbi):
    """Py_FinalizeEx, minus the teardown of what the zygote had before the
    fork (its modules and objects are the same in every run; tearing them
    down would only copy their pages): join non-daemon threads, run atexit
    handlers, clear the modules this run created (so __del__ methods and
    unflushed files behave as at a normal exit), collect, flush stdio."""
    gc = _GC
    # Its state is the interpreter's since 3.10, the module's before: the
    # run's own, if it imported atexit at all.
    atexit = sys.modules.get("atexit")
    if atexit is None and sys.version_info >= (3, 10):
        atexit = _ATEXIT

    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    try:
        if atexit is not None:
            atexit._run_exitfuncs()  # prints errors itself; before 3.10 it re-raises the last
    except BaseException:  # noqa: BLE001
        pass
    _report_imports(os)
    status = _flush_std()
    try:
        _teardown(gc)
    except BaseException:  # noqa: BLE001 - interpreter teardown never fails a run
        pass
    if _flush_std() < 0:
        status = -1
    if status < 0:
        code = 120
    _report_rusage()
    # The run's descriptors go now rather than after the kernel has freed
    # the address space: the server sees the end of stdout and stderr at once.
    os.closerange(0, 1 << 20)
    if kbi:
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # noqa: BLE001
            pass
        code = 130
    os._exit(code & 0xFF)


def _teardown(gc):
    """finalize_modules for what this run created: drop the modules from
    sys.modules, collect, then clear their dicts in reverse import order
    (underscored names first), and collect again."""
    skip = set(sys.builtin_module_names)
    names = [n for n in sys.modules if n == "__main__" or (n not in _inherited and n not in skip)]
    mods = [sys.modules[n] for n in reversed(names)]
    for n in names:
        if n != "__main__":
            sys.modules[n] = None
    gc.collect()
    for m in mods:
        d = getattr(m, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for k in list(d):
            if k.startswith("_") and not k.startswith("__"):
                d[k] = None
        for k in list(d):
            if k != "__builtins__":
                d[k] = None
    del mods
    gc.collect()


def _flush_std():
    status = 0
    for name in ("stdout", "stderr"):
        f = getattr(sys, name, None)
        if f is None:
            continue
        try:
            if getattr(f, "closed", False):
                continue
            f.flush()
        except BaseException as e:  # noqa: BLE001
            if name == "stdout":  # as PyErr_WriteUnraisable(stdout) prints it
                try:
                    os.write(2, ("Exception ignored in: %r\n%s: %s\n" % (f, type(e).__name__, e)).encode("utf-8", "replace"))
                except BaseException:  # noqa: BLE001
                    pass
            status = -1
    return status


# Adaptive preload (see adaptive.go).

# Top-level packages whose cost is mostly in a submodule that every user
# imports by name: that submodule is reported (and preloaded) instead.
_ENTRY_POINTS = ("matplotlib.pyplot", "seaborn", "plotly.express", "scipy.stats", "scipy.optimize", "scipy.sparse")
_MAX_REPORTED = 32


def _auto_preload(auto, send):
    """Import each adaptive module on its own, timed; fail the zygote
    (naming the module) if one fails or starts a thread: a fork keeps only
    the forking thread, so its runs would find the module broken."""
    if not auto:
        return []
    import time
    import _thread

    costs = []
    for m in auto:
        if m in sys.modules:  # an earlier one imported it: it costs nothing here
            costs.append((m, -1.0))
            continue
        t0 = time.perf_counter()
        try:
            __import__(m)
        except BaseException as e:  # noqa: BLE001 - reported, then quit
            send([b"FAIL", ("auto %s: import failed: %s: %s" % (m, type(e).__name__, e)).encode("utf-8", "replace")])
            os._exit(3)
        ms = (time.perf_counter() - t0) * 1000
        if _thread._count() > 0:
            send([b"FAIL", ("auto %s: starts threads at import" % m).encode()])
            os._exit(3)
        costs.append((m, ms))
    return costs


def _rss():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _site_dirs(keep):
    """Remember the zygote's sys.path directories outside the standard
    library (site-packages, a venv's): only modules imported from there are
    reported, never the run's own (its workspace, its PYTHONPATH)."""
    global _SITE_DIRS
    std = os.path.dirname(os.__file__)
    out = []
    for d in sys.path[1:]:
        if not d or not os.path.isabs(d):
            continue
        base = os.path.basename(d)
        if base in ("site-packages", "dist-packages") or not (d == std or d.startswith(std + os.sep)):
            if not d.endswith(".zip"):
                out.append(d.rstrip(os.sep) + os.sep)
    _SITE_DIRS = tuple(out)


def _clear_report():
    """S: the shared page its next G reports in (made once per S, before
    the first fork, so every G it forks shares it), emptied."""
    global _REPORT
    if not _SITE_DIRS:
        return
    if _REPORT is None:
        try:
            import mmap

            _REPORT = mmap.mmap(-1, 4096)  # MAP_SHARED | MAP_ANONYMOUS
        except (ImportError, OSError, ValueError):
            return
    _REPORT[:2] = b"\0\0"


def _report_imports(os):
    """After the run's code: tell S which top-level modules the run imported
    from the site dirs (what a later zygote could preload). S checks it (the
    run could have written anything there). Submodules that preloaded
    packages import lazily are not reported: they are mostly cheap, and each
    replacement re-imports everything in the background."""
    page = _REPORT
    if page is None:
        return
    try:
        names = []
        mods = sys.modules
        for name in list(mods):
            if "." in name or name.startswith("_") or name in _inherited:
                continue
            m = mods.get(name)
            origin = getattr(m, "__file__", None)
            if not isinstance(origin, str) or not origin.startswith(_SITE_DIRS):
                continue
            for ep in _ENTRY_POINTS:
                if ep.startswith(name + ".") and ep in mods:
                    name = ep
            names.append(name)
            if len(names) >= _MAX_REPORTED:
                break
        if names:
            msg = b"I " + " ".join(names).encode("ascii", "replace")
            if len(msg) >= len(page):
                msg = msg[:msg.rfind(b" ", 0, len(page) - 1)]
            page[:len(msg) + 1] = msg + b"\0"
    except BaseException:  # noqa: BLE001 - only an optimisation
        pass


def _read_imports():
    """S: the run's imports report, if G wrote one (it is dead by now),
    keeping only plausible module names (the run could have written
    anything there)."""
    if _REPORT is None:
        return None
    msg = _REPORT[:].partition(b"\0")[0]
    if msg[:2] != b"I ":
        return None
    out = []
    for word in msg[2:].split()[:_MAX_REPORTED]:
        try:
            name = word.decode("ascii")
        except UnicodeDecodeError:
            continue
        if len(name) <= 100 and all(p.isidentifier() for p in name.split(".")):
            out.append(name)
    return out


# The exit watch. G's main thread registers a robust futex list of one entry
# whose futex word (in a page S shares with it) holds G's tid; whenever that
# thread ends (exit, exit_group, any signal) the kernel marks the word
# FUTEX_OWNER_DIED and wakes S, at the start of freeing G's memory rather
# than after it. The run can write the page or register another list: then
# S no longer gets that wake (it waits in wait4 instead, or at most 200 ms
# between checks), and S only ever believes what /proc says (_dying).

_FUTEX_WAITERS = 0x80000000
_FUTEX_OWNER_DIED = 0x40000000
_PF_EXITING = 0x4
_EXIT_PAGE = None  # the shared page, made once per S
_EXIT_ADDR = None  # its address (the same in S and every G it forks)
_GLIBC_ROBUST = None  # G: the robust list glibc registered, (head, size)
_SYSCALLS = {"x86_64": (202, 273, 274), "aarch64": (98, 99, 100)}  # futex, set_robust_list, get_robust_list


def _exit_watch_setup(libc):
    global _EXIT_PAGE, _EXIT_ADDR, _SYS_FUTEX, _SYS_ROBUST, _SYS_GET_ROBUST, _ctypes
    nums = _SYSCALLS.get(os.uname().machine)
    if nums is None:
        return
    try:
        import ctypes
        import mmap

        page = mmap.mmap(-1, 4096)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
    except (ImportError, OSError, ValueError, TypeError):
        return
    _ctypes = ctypes
    _SYS_FUTEX, _SYS_ROBUST, _SYS_GET_ROBUST = nums
    _EXIT_PAGE, _EXIT_ADDR = page, addr


def _disarm_exit_watch():
    if _EXIT_PAGE is not None:
        _EXIT_PAGE[:88] = bytes(88)


def _arm_exit_watch(gpid):
    """S, after forking G: the robust list (head at 0: next, futex_offset,
    list_op_pending; the one entry at 24, its word at 24 + 8) and the word,
    G's tid with FUTEX_WAITERS (so that the kernel wakes on G's death)."""
    if _EXIT_PAGE is None:
        return
    a = _EXIT_ADDR
    b = b"".join(x.to_bytes(8, sys.byteorder) for x in (a + 24, 8, 0, a))
    _EXIT_PAGE[:32] = b
    _EXIT_PAGE[32:36] = (gpid | _FUTEX_WAITERS).to_bytes(4, sys.byteorder)


def _register_exit_watch(libc):
    """G, first thing after the fork (so that no death of G goes unseen).
    The list replaces the one glibc registered for the thread, which only
    process-shared robust mutexes use: a run that dies holding one does not
    mark it EOWNERDEAD for the other processes."""
    global _EXIT_ADDR, _GLIBC_ROBUST
    if _EXIT_ADDR is None:
        return
    head, size = _ctypes.c_void_p(), _ctypes.c_size_t()
    if libc.syscall(_ctypes.c_long(_SYS_GET_ROBUST), 0, _ctypes.byref(head), _ctypes.byref(size)) == 0:  # get_robust_list
        _GLIBC_ROBUST = head, size
    if libc.syscall(_ctypes.c_long(_SYS_ROBUST), _ctypes.c_void_p(_EXIT_ADDR), _ctypes.c_size_t(24)) != 0:
        _EXIT_ADDR = None  # S finds the word unchanged and waits for SIGCHLD or the timeout as ever


def _unregister_exit_watch(libc):
    """G: glibc's robust list back, for a run without the watch."""
    global _EXIT_ADDR
    if _EXIT_ADDR is not None and _GLIBC_ROBUST is not None:
        libc.syscall(_ctypes.c_long(_SYS_ROBUST), _GLIBC_ROBUST[0], _GLIBC_ROBUST[1])
    _EXIT_ADDR = None


def _report_rusage():
    """G, as it exits: its rusage, as wait4 would give it to S, for the
    exit watch (while the kernel frees its memory, /proc has no more of it)."""
    if _EXIT_PAGE is None or _RESOURCE is None:
        return
    try:
        me, kids = _RESOURCE.getrusage(_RESOURCE.RUSAGE_SELF), _RESOURCE.getrusage(_RESOURCE.RUSAGE_CHILDREN)
        vals = (int((me.ru_utime + kids.ru_utime) * 1e6), int((me.ru_stime + kids.ru_stime) * 1e6), max(me.ru_maxrss, kids.ru_maxrss))
        _EXIT_PAGE[64:88] = b"".join(v.to_bytes(8, sys.byteorder) for v in vals)
    except (OSError, ValueError, OverflowError):
        pass


def _exit_word():
    return int.from_bytes(_EXIT_PAGE[32:36], sys.byteorder)


def _futex_wait(libc, word):
    """Sleep while the word holds its value: until G's death marks it, a
    signal arrives (S's SIGCHLD handler makes that interrupt) or 200 ms;
    False when the 200 ms passed."""
    ts = (_ctypes.c_long * 2)(0, 200 * 1000 * 1000)
    return libc.syscall(_ctypes.c_long(_SYS_FUTEX), _ctypes.c_void_p(_EXIT_ADDR + 32), _ctypes.c_int(0),  # FUTEX_WAIT (shared)
                 _ctypes.c_uint32(word), ts, _ctypes.c_void_p(0), _ctypes.c_int(0)) == 0 or _ctypes.get_errno() != 110  # ETIMEDOUT


def _dying(os, gpid):
    """G's main thread has ended: is the run over, with nothing of it able to
    run again? Only if S has no child but G, and every thread of G is
    exiting (PF_EXITING: past exit_signals, never to return to user space)
    with no child of its own. Returns G's wait status (set by the kernel
    before the wake) and its rusage from /proc, else None."""
    try:
        with open(_PROC + "/%d/task/%d/children" % (_ME, _ME), "rb") as f:
            kids = f.read().split()
        if len(kids) != 1 or _local_pid(os, int(kids[0])) != gpid:
            return None
        g = _PROC + "/" + kids[0].decode()
        ws, ticks = 0, [0, 0]
        for t in os.listdir(g + "/task"):
            with open("%s/task/%s/stat" % (g, t), "rb") as f:
                st = f.read()
            fields = st[st.rindex(b")") + 2:].split()
            if not int(fields[6]) & _PF_EXITING:
                return None
            if fields[0] != b"Z":  # a zombie has no children (they went to S)
                with open("%s/task/%s/children" % (g, t), "rb") as f:
                    if f.read().strip():
                        return None
            if t == kids[0].decode():
                ws = int(fields[49])
                ticks = [int(fields[11]) + int(fields[13]), int(fields[12]) + int(fields[14])]
    except (OSError, ValueError, IndexError):
        return None
    # The rusage G wrote just before it exited (its own and its reaped
    # children's; a run that wrote the page itself only misstates its own
    # figures), and never less than the kernel's tick counts, which a run
    # killed before it could write them has alone.
    hz = os.sysconf("SC_CLK_TCK") or 100
    user_us, sys_us, rss = (int.from_bytes(_EXIT_PAGE[o:o + 8], sys.byteorder) for o in (64, 72, 80))
    return ws, max(user_us / 1e6, ticks[0] / hz), max(sys_us / 1e6, ticks[1] / hz), rss


_inherited = _startup_modules

if __name__ == "__main__":
    _zygote()
