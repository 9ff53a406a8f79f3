# pyexec benchmark profiler. Run as:
#   python -u THIS_FILE MARKER ROWS SCRIPT [ARGS...]
# It runs SCRIPT as __main__ (like `python SCRIPT ARGS`) under cProfile and,
# however the script ends (normally, sys.exit, an exception), writes the top
# ROWS functions by cumulative time as one JSON line between two MARKER lines
# on the real stderr. Using stderr instead of a file keeps it working under
# any filesystem confinement; the server cuts the block out again.
import sys


def _pyexec_profile():
    import builtins
    import cProfile
    import json
    import os
    import pstats
    import types

    marker, rows, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sys.argv = sys.argv[3:]
    sys.path[0] = os.path.dirname(os.path.abspath(target))
    # Read, compile and set up __main__ before the profiler starts, so the
    # table holds the script's own calls only (runpy.run_path would add
    # pkgutil's import and its importer lookups to every profile).
    with open(target, "rb") as f:
        code = compile(f.read(), target, "exec")
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=target, __builtins__=builtins, __loader__=None,
                         __spec__=None, __cached__=None, __package__=None)
    sys.modules["__main__"] = main
    prof = cProfile.Profile()
    try:
        prof.enable()
        try:
            exec(code, main.__dict__)
        finally:
            prof.disable()
    finally:
        out = []
        stats = pstats.Stats(prof).stats
        # Hide the wrapper's own frames: this file, the exec that starts
        # the script, and the profiler's disable call.
        hidden = {_pyexec_profile.__code__.co_filename, "<string>"}
        # Name files as tracebacks do: inline code is <code>, workspace
        # files by their workspace-relative path.
        code_file = os.environ.get("PYEXEC_CODE_FILE", "")
        ws = os.environ.get("PYEXEC_WORKSPACE", "")

        def shown(filename):
            if filename == "~":
                return ""
            if code_file and filename == code_file:
                return "<code>"
            if ws and filename.startswith(ws.rstrip("/") + "/"):
                return filename[len(ws.rstrip("/")) + 1:]
            return filename
        for (filename, line, name), (cc, nc, tt, ct, _callers) in stats.items():
            if filename in hidden or (filename == "~" and (
                    "_lsprof.Profiler" in name or name == "<built-in method builtins.exec>")):
                continue
            out.append({
                "function": name,
                "file": shown(filename),
                "line": line,
                "calls": nc,
                "primitive_calls": cc,
                "tottime_seconds": round(tt, 6),
                "cumtime_seconds": round(ct, 6),
            })
        out.sort(key=lambda r: (-r["cumtime_seconds"], -r["tottime_seconds"]))
        err = sys.__stderr__
        err.write("\n" + marker + "\n" + json.dumps(out[:rows]) + "\n" + marker + "\n")
        err.flush()


_pyexec_profile()
