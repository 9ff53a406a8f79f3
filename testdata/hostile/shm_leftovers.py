# Leaves behind in /dev/shm what a recursive walk does not survive: a chain
# of directories deeper than PATH_MAX (made with directory fds, never a
# path), directories it made unreadable (at depth, with content), a FIFO, a socket, symlinks (a
# loop, and one to /), an unreadable file, 20000 files in one directory and
# a POSIX shared memory segment. Expected: exit 0 ("LEFT"); the next run
# (warm: of the same fork server) finds /dev/shm empty.
import os
import socket
from multiprocessing import shared_memory

top = os.open("/dev/shm", os.O_RDONLY | os.O_DIRECTORY)
fd = os.dup(top)
depth = 0
for depth in range(1, 3001):
    os.mkdir("dd", dir_fd=fd)
    nfd = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    if depth % 1000 == 0:
        # A side directory with a file in it, made unreadable, unsearchable
        # and unwritable.
        os.mkdir("side", dir_fd=nfd)
        sfd = os.open("side", os.O_RDONLY | os.O_DIRECTORY, dir_fd=nfd)
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=sfd))
        os.chmod(sfd, 0)
        os.close(sfd)
    os.close(fd)
    fd = nfd
os.close(fd)

os.mkfifo("fifo", dir_fd=top)
s = socket.socket(socket.AF_UNIX)
s.bind("/dev/shm/sock")
os.symlink("loop", "/dev/shm/loop")
os.symlink("/", "/dev/shm/root")
os.close(os.open("/dev/shm/secret", os.O_CREAT | os.O_WRONLY, 0))
os.mkdir("/dev/shm/many")
for i in range(20000):
    os.close(os.open("/dev/shm/many/%d" % i, os.O_CREAT | os.O_WRONLY, 0o600))
os.chmod("/dev/shm/many", 0o100)
m = shared_memory.SharedMemory(name="pyexec-left", create=True, size=1 << 16)
m.buf[:4] = b"left"
print("LEFT depth", depth, "entries", len(os.listdir("/dev/shm")))
