# Tries to kill the server (pid in argv[1] or $PYEXEC_SERVER_PID) and pid 1.
# Expected: "SERVER SIGNAL_DENIED" (run-as uid, Landlock signal scope, or a
# PID namespace where the server's pid does not exist). Under strict, pid 1
# is the run's own placeholder init (signals to it are ignored), so the PID1
# line is informational there; elsewhere it must be denied too.
import os
import signal
import sys

pid = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PYEXEC_SERVER_PID", "1"))
for label, target in (("SERVER", pid), ("PID1", 1)):
    try:
        os.kill(target, signal.SIGTERM)
        print(label, "SIGNALLED", target)
    except OSError as e:
        print(label, "SIGNAL_DENIED", target, e.errno)
