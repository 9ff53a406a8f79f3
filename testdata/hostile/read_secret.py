# Reads a file outside the workspace (argv[1]). Expected under strict:
# DENIED (Landlock limits reads); under workspace the system is readable.
import sys

try:
    with open(sys.argv[1]) as f:
        print("READ", f.read().strip())
except OSError as e:
    print("DENIED", e.errno)
