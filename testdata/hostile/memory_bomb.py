# Allocates and touches memory until something stops it. Expected: the run's
# memory cgroup OOM-kills it (limit_exceeded == "memory", exit_code -9).
chunks = []
while True:
    chunks.append(bytearray(32 << 20))  # bytearray() zero-fills: pages are touched
