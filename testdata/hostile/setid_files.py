# Tries every way to leave a set-user-ID or set-group-ID file, or a device
# node, in the workspace: a setuid copy of the interpreter (through the
# idmapped workspace it would be a setuid-root binary on disk), chmod and
# its variants (fchmod, fchmodat, fchmodat2, the raw syscall), open/openat/
# creat/O_TMPFILE with such a mode, mkdir with S_ISGID, mknod of character
# and block devices (and of a setuid regular file), and openat2, whose mode
# a seccomp filter cannot see. Expected: every attempt DENIED (EPERM; ENOSYS
# for openat2), ordinary modes and FIFOs still work, and no file it made
# carries S_ISUID or S_ISGID or is a device. Then it reports whether its
# writable mounts are nosuid,nodev.
import ctypes
import errno
import os
import platform
import shutil
import stat
import sys
import tempfile

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
X86 = platform.machine() == "x86_64"
NR = {"fchmodat": 268 if X86 else 53, "fchmodat2": 452, "openat2": 437, "chmod": 90 if X86 else None}

d = os.path.abspath("setid-probe")
shutil.rmtree(d, ignore_errors=True)
os.mkdir(d)
py = os.path.join(d, "python")
shutil.copyfile(os.path.realpath(sys.executable), py)
os.chmod(py, 0o755)
print("OK copy+chmod-0755")


def attempt(what, f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            raise OSError(ctypes.get_errno(), what)
        if isinstance(r, int) and what.startswith(("open", "creat", "tmpfile")):
            os.close(r)
        print("MADE", what)
    except OSError as e:
        print("DENIED", what, errno.errorcode.get(e.errno, e.errno))


b = os.fsencode
attempt("chmod-4755", lambda: os.chmod(py, 0o4755))
attempt("chmod-2755", lambda: os.chmod(py, 0o2755))
fd = os.open(py, os.O_RDONLY)
attempt("fchmod-6755", lambda: os.fchmod(fd, 0o6755))
os.close(fd)
attempt("fchmodat-4755", lambda: libc.syscall(NR["fchmodat"], AT_FDCWD, b(py), 0o4755))
attempt("fchmodat2-4755", lambda: libc.syscall(NR["fchmodat2"], AT_FDCWD, b(py), 0o4755, 0))
if NR["chmod"]:
    attempt("raw-chmod-4755", lambda: libc.syscall(NR["chmod"], b(py), 0o4755))
attempt("open-creat-4755", lambda: os.open(d + "/o1", os.O_CREAT | os.O_WRONLY, 0o4755))
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
attempt("openat-creat-2755", lambda: os.open("o2", os.O_CREAT | os.O_WRONLY, 0o2755, dir_fd=dfd))
os.close(dfd)
attempt("creat-4755", lambda: libc.creat(b(d + "/o3"), 0o4755))
attempt("tmpfile-4755", lambda: os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o4755))
attempt("mkdir-2755", lambda: os.mkdir(d + "/sgid", 0o2755))
attempt("mknod-chr", lambda: os.mknod(d + "/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
attempt("mknod-whiteout", lambda: os.mknod(d + "/wh", 0o600 | stat.S_IFCHR, 0))
attempt("mknod-blk", lambda: os.mknod(d + "/sda", 0o600 | stat.S_IFBLK, os.makedev(8, 0)))
attempt("mknod-reg-4755", lambda: os.mknod(d + "/reg", 0o4755 | stat.S_IFREG))


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


how = OpenHow(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
attempt("openat2-4755", lambda: libc.syscall(NR["openat2"], AT_FDCWD, b(d + "/o4"), ctypes.byref(how), ctypes.sizeof(how)))

# What must keep working.
os.mkfifo(d + "/fifo")
os.mknod(d + "/fifo2", 0o600 | stat.S_IFIFO)
os.close(os.open(d + "/plain", os.O_CREAT | os.O_WRONLY, 0o644))
os.chmod(d + "/plain", 0o755)
os.mkdir(d + "/dir", 0o755)
print("FIFO_OK")

bad = []
for name in sorted(os.listdir(d)) + ["."]:
    st = os.lstat(os.path.join(d, name))
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        bad.append(name)
        print("SETID", name, oct(st.st_mode))
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        bad.append(name)
        print("DEVICE", name)
if not bad:
    print("NO_SETID")

for label, path in (("workspace", "."), ("tmp", tempfile.gettempdir()), ("shm", "/dev/shm")):
    try:
        f = os.statvfs(path).f_flag
    except OSError as e:
        print("MOUNT", label, "unknown", e.errno)
        continue
    print("MOUNT", label, "nosuid" if f & os.ST_NOSUID else "SUID", "nodev" if f & os.ST_NODEV else "DEV")
