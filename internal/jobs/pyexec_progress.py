"""Report progress of a pyexec job.

    import pyexec_progress
    for i, item in enumerate(items, 1):
        work(item)
        pyexec_progress.report(i, len(items), f"processed {item}")

pyexec reads the reports (get_job shows the latest, and an MCP call waiting
on the run receives them as progress notifications). Outside pyexec, or when
progress cannot be delivered, report() does nothing and returns False, so a
script can call it unconditionally.

Protocol (for scripts that cannot import this module): write one JSON object
per line, {"current": 5, "total": 10, "message": "..."} ("total" and
"message" optional), to the file descriptor whose number is in the
PYEXEC_PROGRESS_FD environment variable.
"""

import json
import os
import stat
import threading

__all__ = ["report"]

_ENV = "PYEXEC_PROGRESS_FD"
_INODE_ENV = "PYEXEC_PROGRESS_INODE"
_MAX_MESSAGE = 1000  # keeps each line well under PIPE_BUF, so writes stay atomic
_lock = threading.Lock()


def report(current, total=None, message=None):
    """Report that `current` of `total` units of work are done.

    current and total are numbers (total may be None when unknown); message is
    an optional short text. Returns True when the report was delivered.
    """
    fd = os.environ.get(_ENV)
    if not fd:
        return False
    try:
        fd = int(fd)
        st = os.fstat(fd)
    except (ValueError, OSError):
        return False
    # A subprocess of the script inherits the variables but (close_fds) not
    # the pipe: its fd may be an unrelated file, which must not be written.
    if not stat.S_ISFIFO(st.st_mode):
        return False
    inode = os.environ.get(_INODE_ENV)
    if inode and inode != str(st.st_ino):
        return False
    data = {"current": current}
    if total is not None:
        data["total"] = total
    if message is not None:
        data["message"] = str(message)[:_MAX_MESSAGE]
    try:
        line = (json.dumps(data, ensure_ascii=True) + "\n").encode("ascii")
    except (TypeError, ValueError):
        return False
    with _lock:
        try:
            while line:
                n = os.write(fd, line)
                line = line[n:]
        except OSError:
            return False
    return True
