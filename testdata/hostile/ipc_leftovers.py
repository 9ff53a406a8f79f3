# SysV IPC and POSIX message queues a run makes and never removes.
#   make        a shared memory segment, a semaphore set and a message queue
#               (random keys, printed as "KEYS shm sem msg") and a POSIX
#               message queue /pyexec-leftover (Landlock refuses those to
#               confined runs: "MQ refused")
#   find K K K  looks for them: "<kind> gone" or "<kind> FOUND"
#   hold BYTES  a segment of BYTES, every page touched, left attached to nobody
# Expected: what one run makes, the next never finds, and the server's IPC
# namespace never holds; held memory is freed once the run is over.
import ctypes
import ctypes.util
import os
import random
import sys

libc = ctypes.CDLL(None, use_errno=True)
rt = libc if hasattr(libc, "mq_open") else ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
rt.mq_open.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_EXCL, IPC_PRIVATE = 0o1000, 0o2000, 0
MQ = b"/pyexec-leftover"

mode = sys.argv[1]
if mode == "make":
    keys = []
    for get, extra in ((libc.shmget, (4096,)), (libc.semget, (1,)), (libc.msgget, ())):
        while True:
            key = random.randrange(1, 1 << 31)
            args = (key,) + extra + (IPC_CREAT | IPC_EXCL | 0o600,)
            if get(*args) >= 0:
                keys.append(key)
                break
    print("KEYS", *keys)
    fd = rt.mq_open(MQ, os.O_CREAT | os.O_RDWR, 0o600, None)
    print("MQ", "made" if fd >= 0 else "refused %d" % ctypes.get_errno())
elif mode == "find":
    shm, sem, msg = (int(k) for k in sys.argv[2:5])
    for kind, found in (("shm", libc.shmget(shm, 0, 0) >= 0), ("sem", libc.semget(sem, 0, 0) >= 0),
                        ("msg", libc.msgget(msg, 0) >= 0), ("mq", rt.mq_open(MQ, os.O_RDONLY) >= 0)):
        print(kind, "FOUND" if found else "gone")
elif mode == "hold":
    size = int(sys.argv[2])
    sid = libc.shmget(IPC_PRIVATE, ctypes.c_size_t(size), IPC_CREAT | 0o600)
    addr = libc.shmat(sid, None, 0)
    if sid < 0 or addr in (None, ctypes.c_void_p(-1).value):
        print("ERROR", ctypes.get_errno())
        sys.exit(1)
    ctypes.memset(addr, 1, size)
    libc.shmdt(ctypes.c_void_p(addr))
    print("HELD", size)
