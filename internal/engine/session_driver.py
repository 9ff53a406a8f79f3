# pyexec session driver: one live Python namespace, fed cells by the server.
#
# Started like any run (`python -u THIS_FILE`, warm or cold, confined like a
# run) with fd 3 a Unix stream socket to the server. Frames both ways are a
# 4-byte big-endian length and a JSON object.
#
#   driver -> server, once:  {"kind": "ready", "pid": PID, "python": VERSION}
#   server -> driver:        b"C" N b"\n" SOURCE (UTF-8), a cell, with
#                            SCM_RIGHTS [stdout, stderr] on its first
#                            bytes: the cell's own output pipes
#                            or b"I" N: cell N is interrupted (SIGINT follows)
#   driver -> server:        {"kind": "done", "n": N, "result": REPR|null,
#                             "error": {ename, evalue, traceback}|null,
#                             "interrupted": bool}
#                            or {"kind": "exit", "n": N, "code": CODE} when
#                            the cell raised SystemExit (the session ends)
#
# A cell compiles as a module named "<cell N>"; when its last statement is an
# expression, that expression is evaluated apart and its value (unless None)
# is the result, bound to `_` as in the interactive interpreter. Its
# traceback shows the cell's own lines and no frame of this driver. Between
# cells SIGINT is ignored; during one it raises KeyboardInterrupt in the cell
# (the server sends it for a timeout, an interrupt or a cancelled request).
# During a cell, fds 1 and 2 are the cell's pipes; afterwards they go back to
# the run's own stdout and stderr, so what a process the cell left running
# prints later is kept in the session's log, not lost.
import sys
import os

_DRIVER = __file__
_CTL = 3
_MAX_REPR = 1 << 20

# Only built-in modules at startup: a session starts in the time a fork
# takes, not in the time json, ast and traceback take to import (30 ms on
# a loaded machine). Replies are encoded by _dumps; traceback is imported
# on a cell's first error.
_ESCAPES = {i: "\\u%04x" % i for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _dumps(v):
    """JSON for the reply's values: None, bools, ints, strings, dicts."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.translate(_ESCAPES) + '"'
    return "{" + ",".join(_dumps(k) + ":" + _dumps(x) for k, x in v.items()) + "}"


def _main():
    import _socket
    import _signal
    import _ast
    import builtins

    sources = {}  # cell name -> source, for tracebacks (linecache)

    ctl = _socket.socket(fileno=_CTL)
    os.set_inheritable(_CTL, False)
    state = {"in_cell": False, "absorb": False}

    def on_int(sig, frame):
        if state["in_cell"] and not state["absorb"]:
            raise KeyboardInterrupt

    def send(obj):
        data = _dumps(obj).encode("utf-8", "replace")
        ctl.sendall(len(data).to_bytes(4, "big") + data)

    def recv_exact(n, fds):
        buf = b""
        while len(buf) < n:
            if fds is not None and not buf:
                chunk, anc, _, _ = ctl.recvmsg(n, _socket.CMSG_SPACE(4 * 4))
                for level, kind, data in anc:
                    if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                        k = len(data) - len(data) % 4
                        fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, k, 4)]
            else:
                chunk = ctl.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def interrupted_already(n):
        """Whether an interrupt for cell n is queued (it came before the
        cell's first instruction, when SIGINT is ignored); interrupts for
        earlier cells are dropped."""
        hit = False
        while True:
            ctl.setblocking(False)
            try:
                head = ctl.recv(4)
            except (BlockingIOError, InterruptedError):
                return hit
            finally:
                ctl.setblocking(True)
            if len(head) < 4:
                rest = recv_exact(4 - len(head), None) if head else None
                if rest is None:
                    return hit
                head += rest
            body = recv_exact(int.from_bytes(head, "big"), None) or b""
            if body[:1] == b"I" and body[1:] == str(n).encode():
                hit = True

    # The user's namespace: a fresh __main__, as `python -i` has.
    main = type(sys)("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    saved_out, saved_err = os.dup(1), os.dup(2)
    os.set_inheritable(saved_out, False)
    os.set_inheritable(saved_err, False)
    _signal.signal(_signal.SIGINT, on_int)
    me = os.getpid()
    v = sys.version_info
    send({"kind": "ready", "pid": os.getpid(), "python": "%d.%d.%d" % (v[0], v[1], v[2])})

    while True:
        fds = []
        head = recv_exact(4, fds)
        if head is None:
            os._exit(0)  # the server went away: so does the session
        body = recv_exact(int.from_bytes(head, "big"), None)
        if body is None:
            os._exit(0)
        if body[:1] == b"I":
            continue  # an interrupt for a cell that has ended
        head, _, code = body.partition(b"\n")
        if head[:1] != b"C" or not head[1:].isdigit() or len(fds) < 2:
            for fd in fds:
                os.close(fd)
            continue
        n, source = int(head[1:]), code.decode("utf-8", "surrogateescape")
        name = "<cell %d>" % n
        sources[name] = source
        lc = sys.modules.get("linecache")
        if lc is not None:
            lc.cache[name] = (len(source), None, source.splitlines(True), name)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        _signal.signal(_signal.SIGINT, on_int)
        reply = {"kind": "done", "n": n, "result": None, "error": None, "interrupted": False}
        exited, code = False, 0
        try:
            # SIGINT blocked while the queue is read: a KeyboardInterrupt
            # must not cut a frame in half. An interrupt found queued is
            # raised here, and its SIGINT (if it comes only now) absorbed.
            _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})
            try:
                state["absorb"] = False
                state["in_cell"] = True
                state["absorb"] = interrupted_already(n)
            finally:
                _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})
            if state["absorb"]:
                raise KeyboardInterrupt
            tree = compile(source, name, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
            last = None
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                last = _ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec", dont_inherit=True), main.__dict__)
            if last is not None:
                value = eval(compile(last, name, "eval", dont_inherit=True), main.__dict__)
                state["in_cell"] = False
                if value is not None:
                    main.__dict__["_"] = value
                    builtins._ = value
                    try:
                        text = repr(value)
                    except BaseException as e:  # noqa: BLE001 - a broken __repr__ is the cell's error
                        text = "<repr failed: %s: %s>" % (type(e).__name__, e)
                    if len(text) > _MAX_REPR:
                        text = text[:_MAX_REPR] + "... [repr cut at %d characters]" % _MAX_REPR
                    reply["result"] = text
            state["in_cell"] = False
        except SystemExit as e:
            state["in_cell"] = False
            exited = True
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                code = 1
                try:
                    sys.stderr.write(str(e.code) + "\n")
                except BaseException:  # noqa: BLE001
                    pass
        except BaseException as e:  # noqa: BLE001 - every error is the cell's
            state["in_cell"] = False
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == _DRIVER:
                tb = tb.tb_next
            import traceback
            import linecache

            for k, src in sources.items():
                linecache.cache[k] = (len(src), None, src.splitlines(True), k)
            try:
                lines = traceback.format_exception(type(e), e, tb)
            except BaseException as e2:  # noqa: BLE001 - a broken exception still ends the cell
                lines = ["%s: %s (and formatting its traceback failed: %r)\n" % (type(e).__name__, e, e2)]
            reply["error"] = {"ename": type(e).__name__, "evalue": str(e), "traceback": "".join(lines)}
            reply["interrupted"] = isinstance(e, KeyboardInterrupt)
            sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
            del e, tb
        state["in_cell"] = False
        if os.getpid() != me:
            # A process the cell forked (os.fork) came back here: it ends as
            # a forked child does, and never talks to the server.
            if reply["error"] is not None:
                try:
                    sys.stderr.write(reply["error"]["traceback"])
                except BaseException:  # noqa: BLE001
                    pass
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except BaseException:  # noqa: BLE001
                    pass
            os._exit(code if exited else (1 if reply["error"] else 0))
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:  # noqa: BLE001
                pass
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        if exited:
            send({"kind": "exit", "n": n, "code": code})
            os._exit(code & 0xFF)
        send(reply)


if __name__ == "__main__":
    _main()
