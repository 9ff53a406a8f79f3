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
#                             "interrupted": bool, "outputs": COUNT}
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
#
# Rich outputs: the run's display machinery (pyexec_rt, installed before
# this driver started, as for any run) records what a cell displays --
# display(), IPython.display, plt.show() -- into a directory of the cell's
# own (OUTPUT_DIR/cell-N), as a run's go into OUTPUT_DIR. At the cell's end
# the driver adds, as IPython's inline backend does, the rich form of the
# last expression's value (when it has more than a repr) and the figures
# still open (then closed). "outputs" counts the records: the server reads
# the cell's directory only when there are some, and the next cell removes
# it.
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


_PIP = r'''
"""pip inside a pyexec session: installs into the session's overlay (a
directory on sys.path of the session's interpreter, never the shared
environment it started in) with uv, confined like the session itself."""
import os
import subprocess
import sys


def main(argv):
    overlay = os.environ.get("PYEXEC_SESSION_OVERLAY", "")
    uv = os.environ.get("PYEXEC_UV", "")
    if not argv or argv[0] in ("-h", "--help", "help"):
        print("pip in a pyexec session: `pip install PACKAGE...` installs into this session's own "
              "package overlay (%s); the next import sees it, no restart needed. `pip list` lists the "
              "overlay. Other pip commands are not available here." % overlay)
        return 0
    if not overlay or not uv:
        sys.stderr.write("pip: this session cannot install packages: %s\n" % (
            "no package overlay" if not overlay else os.environ.get("PYEXEC_PIP_OFF", "uv is not available")))
        return 1
    cmd, rest = argv[0], argv[1:]
    extra = [a for a in os.environ.get("PYEXEC_UV_ARGS", "").split("\n") if a]
    env = dict(os.environ)
    tmp = os.path.dirname(overlay)
    env.update(UV_CACHE_DIR=os.path.join(tmp, ".pyexec-uv-cache"), UV_PYTHON_DOWNLOADS="never",
               UV_NO_PROGRESS="1", UV_LINK_MODE="copy", NO_COLOR="1")
    if cmd == "install":
        args, skip = [], False
        for a in rest:
            if skip:
                skip = False
            elif a in ("--user", "--no-warn-script-location", "--disable-pip-version-check", "-q", "--quiet", "--break-system-packages"):
                pass
            elif a in ("--target", "-t", "--prefix", "--root"):
                sys.stderr.write("pip: %s is not supported in a session: packages go into the session's overlay\n" % a)
                return 2
            else:
                args.append(a)
        argv2 = [uv, "pip", "install", "--target", overlay, "--python", sys.executable] + extra + args
    elif cmd in ("list", "freeze"):
        argv2 = [uv, "pip", cmd, "--target", overlay, "--python", sys.executable]
    else:
        sys.stderr.write("pip: `pip %s` is not available in a session; `pip install` and `pip list` are\n" % cmd)
        return 2
    code = subprocess.call(argv2, env=env)
    if code != 0 and cmd == "install" and os.environ.get("PYEXEC_NETWORK") == "deny":
        sys.stderr.write("pip: the session's network is denied (network: deny): packages can come only "
                         "from the server's local wheel directories, so this install failed\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def _overlay():
    """Put the session's package overlay on sys.path (and PYTHONPATH, for
    the processes cells start), and a pip that installs there first on
    PATH (and as `python -m pip`). Only names here: the files are written
    before the first cell (_overlay_files), off the session's start."""
    overlay = os.environ.get("PYEXEC_SESSION_OVERLAY")
    if not overlay:
        return None
    tmp = os.path.dirname(overlay)
    bin_dir, mod_dir = os.path.join(tmp, ".pyexec-bin"), os.path.join(tmp, ".pyexec-pip")
    sys.path.append(overlay)
    sys.path.append(mod_dir)  # after the environment's own packages
    pp = os.environ.get("PYTHONPATH")
    # The shim's pip comes before the environment's for the processes cells
    # start (`python -m pip install`): a real pip there could only try to
    # write the shared environment, which is read-only.
    add = overlay + os.pathsep + mod_dir
    os.environ["PYTHONPATH"] = pp + os.pathsep + add if pp else add
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    return overlay, bin_dir, mod_dir


def _overlay_files(names):
    """Write the overlay dir and the pip shim (once, before the first cell)."""
    overlay, bin_dir, mod_dir = names
    try:
        os.makedirs(overlay, exist_ok=True)
        os.makedirs(bin_dir, exist_ok=True)
        os.makedirs(os.path.join(mod_dir, "pip"), exist_ok=True)
        with open(os.path.join(bin_dir, "pyexec_pip.py"), "w") as f:
            f.write(_PIP)
        for name in ("pip", "pip3"):
            path = os.path.join(bin_dir, name)
            with open(path, "w") as f:
                f.write("#!%s\nimport sys\nsys.path.insert(0, %r)\nimport pyexec_pip\nsys.exit(pyexec_pip.main(sys.argv[1:]))\n" % (sys.executable, bin_dir))
            os.chmod(path, 0o755)
        with open(os.path.join(mod_dir, "pip", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(mod_dir, "pip", "__main__.py"), "w") as f:
            f.write("import sys\nsys.path.insert(0, %r)\nimport pyexec_pip\nsys.exit(pyexec_pip.main(sys.argv[1:]))\n" % bin_dir)
    except OSError:
        pass
    # An import tried before the directory existed cached "nothing here".
    for d in (overlay, mod_dir):
        sys.path_importer_cache.pop(d, None)


def _find_rt(builtins):
    """The run's pyexec_rt (its module dict), reached through the display()
    it installed: it is kept out of sys.modules on purpose."""
    g = getattr(getattr(builtins, "display", None), "__globals__", None)
    if isinstance(g, dict) and g.get("__name__") == "pyexec_rt" and g.get("_state", {}).get("out"):
        return g
    return None


def _cell_begin(st, base, n):
    """Point pyexec_rt's records at cell n's own directory, after removing
    the previous cell's (the server has read it)."""
    prev = st.get("out")
    if st.get("events") and prev and prev != base:
        try:
            for name in os.listdir(prev):
                os.unlink(os.path.join(prev, name))
            os.rmdir(prev)
        except OSError:
            pass
    st["out"] = base + "/cell-%d" % n
    st["seq"] = st["events"] = st["figures"] = 0
    st.pop("figures_note", None)


def _cell_figures(rt, st):
    """Capture the figures still open at the cell's end, then close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not st.get("images"):
        return
    try:
        if plt.get_fignums():
            rt["_load"]("pyexec_display").capture_open_figures(plt, st)
    except BaseException as e:  # noqa: BLE001 - the cell's result stands
        try:
            sys.stderr.write("[pyexec: capturing the cell's figures failed: %s]\n" % (e,))
        except BaseException:  # noqa: BLE001
            pass


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

    overlay = _overlay()
    rt = _find_rt(builtins)
    if rt is not None:
        st = rt["_state"]
        out_base = st["out"]
        try:
            os.mkdir(out_base, 0o700)
        except OSError:
            pass

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
        if overlay is not None:
            _overlay_files(overlay)
            overlay = None
        name = "<cell %d>" % n
        sources[name] = source
        lc = sys.modules.get("linecache")
        if lc is not None:
            lc.cache[name] = (len(source), None, source.splitlines(True), name)
        if rt is not None:
            _cell_begin(st, out_base, n)
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
                    if rt is not None and type(value).__module__ != "builtins":
                        try:
                            rt["_load"]("pyexec_display").show_result(value, st)
                        except BaseException as e:  # noqa: BLE001 - the repr stands
                            sys.stderr.write("[pyexec: the value's rich display failed: %s]\n" % (e,))
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
                te = traceback.TracebackException(type(e), e, tb)
                # The driver's SIGINT handler is the last frame of an
                # interrupt's traceback: only the cell's frames are shown.
                te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != _DRIVER])
                lines = list(te.format())
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
        if rt is not None and not exited:
            _cell_figures(rt, st)
            reply["outputs"] = st.get("events", 0)
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
