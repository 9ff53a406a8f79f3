# Plants a symlink in the workspace pointing outside (argv[1]) and writes
# through it. Expected: DENIED (Landlock checks the resolved path).
import os
import sys

link = "escape-link"
if os.path.lexists(link):
    os.remove(link)
os.symlink(sys.argv[1], link)
try:
    with open(os.path.join(link, "pwned.txt"), "w") as f:
        f.write("pwned")
    print("ESCAPED")
except OSError as e:
    print("DENIED", e.errno)
finally:
    os.remove(link)
