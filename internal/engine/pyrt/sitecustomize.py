# pyexec: installs the run's display and error hooks (pyexec_rt.py) in a
# cold run, then gets out of the way: its directory leaves sys.path and
# PYTHONPATH (so subprocesses start plain), and the sitecustomize it shadows,
# if any, runs as it would have.
import os
import sys


def _pyexec_boot():
    d = os.path.dirname(os.path.abspath(__file__))
    pp = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if pp and pp[0] == d:
        if len(pp) > 1:
            os.environ["PYTHONPATH"] = os.pathsep.join(pp[1:])
        else:
            del os.environ["PYTHONPATH"]
    while d in sys.path:
        sys.path.remove(d)
    path = os.path.join(d, "pyexec_rt.py")
    try:
        with open(path, "rb") as f:
            src = f.read()
        rt = type(sys)("pyexec_rt")
        rt.__file__ = path
        exec(compile(src, path, "exec"), rt.__dict__)
        rt.install()
    except Exception as e:  # noqa: BLE001 - never break the user's run
        sys.stderr.write("[pyexec: display hooks unavailable: %s]\n" % (e,))
    for p in sys.path:
        other = os.path.join(p, "sitecustomize.py")
        if p and os.path.isfile(other):
            m = type(sys)("sitecustomize")
            m.__file__ = other
            with open(other, "rb") as f:
                exec(compile(f.read(), other, "exec"), m.__dict__)
            sys.modules["sitecustomize"] = m  # what the import of this one returns
            break


_pyexec_boot()
del _pyexec_boot
