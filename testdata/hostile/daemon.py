# setsid + double fork: a daemon that tries to outlive the run. Expected: the
# run ends normally and no process of it remains afterwards.
import os
import sys
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        sys.stdout.close()
        time.sleep(3600)  # pyexec-hostile-daemon marker
    os._exit(0)
time.sleep(0.3)
print("PARENT_EXITS")
