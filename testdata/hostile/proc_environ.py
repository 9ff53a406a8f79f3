# Reads the environment of pid 1 and of the server (argv[1]) through /proc.
# Expected: DENIED for both.
import sys

pids = ["1"] + sys.argv[1:2]
for p in pids:
    try:
        with open(f"/proc/{p}/environ", "rb") as f:
            data = f.read()
        print("READ", p, len(data))
    except OSError as e:
        print("DENIED", p, e.errno)
