# Tries to kill the server (pid in argv[1] or $PYEXEC_SERVER_PID) and pid 1.
# Expected: SIGNAL_DENIED for both (run-as uid, Landlock signal scope, or a
# PID namespace where the pid does not exist).
import os
import signal
import sys

pid = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PYEXEC_SERVER_PID", "1"))
for target in (pid, 1):
    if target == os.getpid():
        continue
    try:
        os.kill(target, signal.SIGTERM)
        print("SIGNALLED", target)
    except OSError as e:
        print("SIGNAL_DENIED", target, e.errno)
