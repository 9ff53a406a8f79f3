# A PEP 517 build backend a run plants (`backend-path = ["."]`): whoever
# builds the project imports it. Each hook records the uid it runs as in
# MARKER, then tries to write every path in TARGETS (the shared uv cache,
# the state dir, another environment...), recording ESCAPED or DENIED for
# each. Expected: it runs as the run user, confined; never uid 0, never
# ESCAPED. It then builds a one-module wheel so the build succeeds.
import base64
import hashlib
import os
import zipfile

MARKER = "{marker}"
TARGETS = {targets}
NAME = "{name}"
VERSION = "1.0"
MOD = NAME.replace("-", "_")


def _record(hook):
    lines = ["uid %d %s" % (os.getuid(), hook)]
    for t in TARGETS:
        try:
            with open(t, "w") as f:
                f.write("pwned")
            lines.append("ESCAPED " + t)
        except OSError as e:
            lines.append("DENIED %s %d" % (t, e.errno))
    try:
        with open(MARKER, "a") as f:
            f.write("\n".join(lines) + "\n")
    except OSError:
        pass


def _wheel(wheel_directory):
    name = "%s-%s-py3-none-any.whl" % (MOD, VERSION)
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (NAME, VERSION)
    files = {
        MOD + "/__init__.py": "BUILT_BY = %d\n" % os.getuid(),
        "%s-%s.dist-info/METADATA" % (MOD, VERSION): meta,
        "%s-%s.dist-info/WHEEL" % (MOD, VERSION): "Wheel-Version: 1.0\nGenerator: evil\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
            h = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (p, h, len(c)))
        rec = "%s-%s.dist-info/RECORD" % (MOD, VERSION)
        record.append(rec + ",,")
        z.writestr(rec, "\n".join(record) + "\n")
    return name


def get_requires_for_build_wheel(config_settings=None):
    _record("get_requires_for_build_wheel")
    return []


def get_requires_for_build_editable(config_settings=None):
    _record("get_requires_for_build_editable")
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _record("build_wheel")
    return _wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _record("build_editable")
    return _wheel(wheel_directory)


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("no sdist")
