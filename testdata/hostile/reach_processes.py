# Tries to reach processes that are not the run's: each LABEL:PID in argv
# (the server, a concurrent run, a warm interpreter...), then every pid of
# its own PID namespace that is not one of its own processes. For each it
# tries what a same-uid process could do without any privilege: lower its
# open-files limit (prlimit), renice it (setpriority), pin it to a CPU
# (sched_setaffinity), change its scheduling policy and I/O priority, signal
# it, open a pidfd, and read its /proc/PID/cmdline and environ. It also
# renices "every process of its uid" (PRIO_USER), which the kernel limits to
# what the caller's PID namespace shows.
# Expected: "REACHED" never appears; every target line says DENIED (EPERM,
# ESRCH, ENOENT or EACCES); "SWEEP 0 reachable".
import ctypes
import os
import platform
import resource
import sys

libc = ctypes.CDLL(None, use_errno=True)
IOPRIO = 251 if platform.machine() == "x86_64" else 30
PIDFD_OPEN = 434


def errno_of(f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            return ctypes.get_errno()
        return 0
    except OSError as e:
        return e.errno


def ioprio_set(pid):
    return libc.syscall(IOPRIO, 1, pid, (2 << 13) | 7)  # IOPRIO_WHO_PROCESS, best effort 7


def attempts(pid):
    return [
        ("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3))),
        ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
        ("affinity", lambda: os.sched_setaffinity(pid, {0})),
        ("scheduler", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
        ("ioprio", lambda: ioprio_set(pid)),
        ("kill", lambda: os.kill(pid, 0)),
        ("pidfd", lambda: os.close(libc.syscall(PIDFD_OPEN, pid, 0)) if libc.syscall(PIDFD_OPEN, pid, 0) >= 0 else -1),
        ("cmdline", lambda: open("/proc/%d/cmdline" % pid, "rb").read()),
        ("environ", lambda: open("/proc/%d/environ" % pid, "rb").read()),
    ]


print("SELF", os.getpid())
for target in sys.argv[1:]:
    label, _, pid = target.partition(":")
    pid = int(pid)
    if pid == os.getpid():
        print(label, "is this process's own pid here: not a target")
        continue
    for name, f in attempts(pid):
        e = errno_of(f)
        print(label, name, "REACHED" if e == 0 else "DENIED %d" % e)

# PRIO_USER: every process of this uid the kernel lets the caller see.
e = errno_of(lambda: os.setpriority(os.PRIO_USER, os.getuid(), 0))
print("prio_user", "DENIED %d" % e if e else "done (own namespace only)")

# Every other pid of this namespace: its init, a warm interpreter and its
# supervisor, anything else visible.
own = {os.getpid()}
reachable = []
for pid in range(1, 4096):
    if pid in own:
        continue
    if errno_of(lambda: resource.prlimit(pid, resource.RLIMIT_FSIZE)) == 0:
        reachable.append(pid)
        for name, f in attempts(pid)[:5]:
            if errno_of(f) == 0:
                print("ns-pid", pid, name, "REACHED")
print("SWEEP %d reachable" % len(reachable), reachable[:10])
