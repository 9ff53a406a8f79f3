# Prints ~200 MB as fast as it can. Expected: exit 0, stdout truncated, the
# server's memory stays bounded.
import sys

line = ("x" * 1023 + "\n").encode()
out = sys.stdout.buffer
for _ in range(200 * 1024):
    out.write(line)
out.flush()
print("FLOOD DONE", file=sys.stderr)
