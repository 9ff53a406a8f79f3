# pyexec's in-run side, installed before the script's first line (cold:
# sitecustomize.py; warm: the driver, per run). It must stay cheap: what is
# done here runs before every `print(1)`. Heavier work (rendering MIME
# bundles, capturing figures) lives in pyexec_display.py, loaded on first
# use.
#
# It records, in the run's output dir (PYEXEC_OUTPUT_DIR, inside the run's
# private temp dir), an events.jsonl the server reads when the run is over:
#   {"kind": "error", "ename", "evalue", "traceback": [...], "module"}
#   {"kind": "display", "data": {mime: text}, "files": {mime: name}, "source"}
import os
import sys

_state = {}
_mods = {}


def install():
    env = os.environ
    out = env.get("PYEXEC_OUTPUT_DIR")
    if not out:
        return
    _state.clear()
    _state.update(
        out=out,
        pid=os.getpid(),
        dir=os.path.dirname(os.path.abspath(__file__)),
        code=env.get("PYEXEC_CODE_FILE", ""),
        ws=env.get("PYEXEC_WORKSPACE", ""),
        images=env.get("PYEXEC_CAPTURE_IMAGES", "1") != "0",
        seq=0,
    )
    sys.excepthook = _excepthook
    import builtins

    builtins.display = display
    if "matplotlib.pyplot" in sys.modules or "IPython.display" in sys.modules:
        _load("pyexec_display").patch_loaded(_state)
    if not any(isinstance(f, _PostImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImport())


def display(*objs, **kwargs):
    """Show objects to the caller, as Jupyter's display() does: each as a
    MIME bundle from its rich reprs (_repr_mimebundle_, _repr_png_, ...).
    Keyword arguments of IPython's display are accepted and ignored."""
    if not _state:
        for o in objs:
            print(repr(o))
        return
    d = _load("pyexec_display")
    for o in objs:
        d.show(o, _state)


def _load(name):
    m = _mods.get(name)
    if m is None:
        path = os.path.join(_state.get("dir") or os.path.dirname(os.path.abspath(__file__)), name + ".py")
        m = type(sys)(name)
        m.__file__ = path
        m._pyexec_rt = _Handle
        with open(path, "rb") as f:
            exec(compile(f.read(), path, "exec"), m.__dict__)
        _mods[name] = m
    return m


class _PostImport:
    """Patches matplotlib.pyplot (figure capture at show() and at exit) and
    IPython.display (display routed here) once they are imported. For any
    other import it costs one string comparison."""

    _names = ("matplotlib.pyplot", "IPython.display", "IPython.core.display_functions")

    def find_spec(self, name, path=None, target=None):
        if name not in self._names or not _state:
            if name == "matplotlib" and _state:
                _seed_font_cache()
            return None
        for f in sys.meta_path:
            if f is self or not hasattr(f, "find_spec"):
                continue
            spec = f.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        orig = getattr(loader, "exec_module", None)
        if orig is None:
            return spec

        def exec_module(module):
            orig(module)
            try:
                _load("pyexec_display").patch_module(name, module, _state)
            except Exception as e:  # noqa: BLE001 - never break the import
                sys.stderr.write("[pyexec: could not hook %s: %s]\n" % (name, e))

        loader.exec_module = exec_module  # this module's own loader instance
        return spec


def _seed_font_cache():
    """Copy the environment's matplotlib font list (built once per
    environment by the server, confined, and read-only here) into this
    run's own config dir, so that matplotlib does not scan every font
    again. Only when the config dir is pyexec's (the run's temp dir)."""
    try:
        conf = os.environ.get("MPLCONFIGDIR", "")
        if conf != os.path.join(os.path.dirname(_state["out"]), "matplotlib"):
            return
        src = os.path.join(sys.prefix, ".pyexec-mpl")
        names = [n for n in os.listdir(src) if n.startswith("fontlist-") and n.endswith(".json")]
        if not names:
            return
        os.makedirs(conf, exist_ok=True)
        for n in names:
            dst = os.path.join(conf, n)
            if not os.path.exists(dst):
                with open(os.path.join(src, n), "rb") as f, open(dst, "xb") as g:
                    g.write(f.read())
    except Exception:  # noqa: BLE001 - without it matplotlib scans the fonts
        pass


def _clean_name(fn):
    code, ws = _state.get("code"), _state.get("ws")
    if code and fn == code:
        return "<code>"
    if ws and fn.startswith(ws.rstrip("/") + "/"):
        return fn[len(ws.rstrip("/")) + 1:]
    return fn


def _excepthook(t, v, tb):
    if issubclass(t, KeyboardInterrupt):
        # Importing traceback (tokenize) would clear the interpreter's
        # "unhandled KeyboardInterrupt" flag and change the exit status.
        # Importing json here would clear it too (on interpreters that have
        # not imported json yet): the record is written by hand.
        sys.__excepthook__(t, v, tb)
        try:
            emit_raw('{"kind": "error", "ename": %s, "evalue": %s, "traceback": []}' % (_q(t.__qualname__), _q(str(v))))
        except Exception:  # noqa: BLE001
            pass
        return
    try:
        import traceback

        te = traceback.TracebackException(t, v, tb, compact=True) if sys.version_info >= (3, 10) else traceback.TracebackException(t, v, tb)
        seen = set()
        stack = [te]
        while stack:
            e = stack.pop()
            if e is None or id(e) in seen:
                continue
            seen.add(id(e))
            for fr in e.stack:
                fr.line  # looked up before the name changes
                fr.filename = _clean_name(fr.filename)
            if getattr(e, "filename", None):
                e.filename = _clean_name(e.filename)
            stack += [e.__cause__, e.__context__] + list(getattr(e, "exceptions", None) or [])
        lines = list(te.format())
        sys.stderr.write("".join(lines))
        sys.stderr.flush()
        if os.getpid() == _state.get("pid"):
            name = t.__qualname__ if t.__module__ in ("builtins", "__main__") else t.__module__ + "." + t.__qualname__
            rec = {"kind": "error", "ename": name, "evalue": str(v), "traceback": "".join(lines).rstrip("\n").split("\n")}
            if isinstance(v, ImportError) and getattr(v, "name", None):
                rec["module"] = v.name
            emit(rec)
    except Exception:  # noqa: BLE001 - fall back to the interpreter's own
        sys.__excepthook__(t, v, tb)


def _q(s):
    """s as a JSON string, without the json module."""
    return '"' + "".join(c if c >= " " and c not in '"\\' else "\\u%04x" % ord(c) for c in s) + '"'


def emit(rec):
    """Append one record to the run's events file (main process only)."""
    if os.getpid() != _state.get("pid"):
        return
    import json

    emit_raw(json.dumps(rec))


def emit_raw(line):
    """Append one JSON line to the run's events file (main process only)."""
    if os.getpid() != _state.get("pid"):
        return
    out = _state["out"]
    try:
        os.mkdir(out, 0o700)
    except FileExistsError:
        pass
    with open(os.path.join(out, "events.jsonl"), "a", encoding="utf-8") as f:
        f.write(line + "\n")
    _state["events"] = _state.get("events", 0) + 1  # a session's cell reports how many


def new_file(ext):
    """A fresh file name in the output dir, and its path."""
    _state["seq"] += 1
    name = "out-%d.%s" % (_state["seq"], ext)
    out = _state["out"]
    try:
        os.mkdir(out, 0o700)
    except FileExistsError:
        pass
    return name, os.path.join(out, name)


class _Handle:
    """What pyexec_display reaches of this module (not in sys.modules)."""

    _state = _state
    emit = staticmethod(emit)
    new_file = staticmethod(new_file)
    display = staticmethod(display)
