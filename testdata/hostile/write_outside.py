# Tries to write outside the workspace. Prints ESCAPED for every write that
# worked, DENIED otherwise. Expected under workspace/strict: no ESCAPED.
import os
import sys

targets = sys.argv[1:] or []
targets += ["/etc/pyexec-pwned", "/usr/pyexec-pwned", "/var/tmp/pyexec-pwned",
            os.path.expanduser("~root/pyexec-pwned"), "/dev/shm/../pyexec-pwned",
            os.path.join(os.getcwd(), "..", "pyexec-pwned")]
for t in targets:
    try:
        with open(t, "w") as f:
            f.write("pwned")
        print("ESCAPED", t)
        os.remove(t)
    except OSError as e:
        print("DENIED", t, e.errno)
