# pyexec benchmark profiler. Run as:
#   python -u THIS_FILE MARKER ROWS SCRIPT [ARGS...]
# It runs SCRIPT as __main__ (like `python SCRIPT ARGS`) under cProfile and,
# however the script ends (normally, sys.exit, an exception), writes the top
# ROWS functions by cumulative time as one JSON line between two MARKER lines
# on the real stderr. Using stderr instead of a file keeps it working under
# any filesystem confinement; the server cuts the block out again.
import sys


def _pyexec_profile():
    import cProfile
    import json
    import os
    import pstats
    import runpy

    marker, rows, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sys.argv = sys.argv[3:]
    sys.path[0] = os.path.dirname(os.path.abspath(target))
    prof = cProfile.Profile()
    try:
        prof.enable()
        try:
            runpy.run_path(target, run_name="__main__")
        finally:
            prof.disable()
    finally:
        out = []
        stats = pstats.Stats(prof).stats
        # Hide the wrapper's own frames: runpy, this file, the exec that
        # runpy uses to start the script, and the profiler's disable call.
        hidden = {runpy.__file__, runpy.__file__.rstrip("c"), "<frozen runpy>", "<string>",
                  _pyexec_profile.__code__.co_filename}
        for (filename, line, name), (cc, nc, tt, ct, _callers) in stats.items():
            if filename in hidden or (filename == "~" and (
                    "_lsprof.Profiler" in name or name == "<built-in method builtins.exec>")):
                continue
            out.append({
                "function": name,
                "file": "" if filename == "~" else filename,
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
