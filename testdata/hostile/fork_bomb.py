# A real fork bomb: every process forks forever. Contained by the run's pids
# cgroup (max_procs); every process must be gone when the run ends.
import os
import time

while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
