"""pyexec's ruff driver: format or lint one source with ruff, confined like a run.

The server runs this file through its engine (as the run user, under the
strict sandbox, with no network) with a JSON options argument. The source is
the workspace file named in the options, read here inside the sandbox, or
the inline code on stdin. The outcome goes to file descriptor 3 as one JSON
object, so nothing ruff prints can be mistaken for it. With "write", the
formatted or fixed code is written back to that file from inside the sandbox
too: the server itself never reads or writes a workspace file for this.
"""

import difflib
import json
import os
import subprocess
import sys


def ruff_binary(opts):
    if opts.get("ruff"):
        return opts["ruff"]
    from ruff.__main__ import find_ruff_bin  # slow (sysconfig): the server passes the path

    return find_ruff_bin()


def run(args, source):
    p = subprocess.run(args, input=source, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace").strip()


def unified(old, new, name):
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/" + name, "b/" + name
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def write_back(path, text):
    # O_NOFOLLOW: a symlink planted after the server checked the path is
    # refused rather than followed (the sandbox would stop an escape anyway).
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def diagnostics(raw):
    out = []
    for d in json.loads(raw or b"[]"):
        loc, end, fix = d.get("location") or {}, d.get("end_location") or {}, d.get("fix")
        out.append(
            {
                "rule": d.get("code") or "",
                "name": d.get("name") or "",
                "message": d.get("message") or "",
                "line": loc.get("row") or 0,
                "column": loc.get("column") or 0,
                "end_line": end.get("row") or 0,
                "end_column": end.get("column") or 0,
                "fix_available": fix is not None,
                "fix_applicability": (fix or {}).get("applicability") or "",
                "url": d.get("url") or "",
            }
        )
    return out


def main():
    opts = json.loads(sys.argv[1])
    result = {}
    try:
        result = work(opts)
    except Exception as e:  # reported, never a traceback the server must parse
        result = {"error": "%s: %s" % (type(e).__name__, e)}
    with os.fdopen(3, "w", encoding="utf-8") as out:
        json.dump(result, out)


def work(opts):
    ruff = ruff_binary(opts)
    path = opts.get("path") or ""
    if path:
        with open(path, "rb") as f:
            source = f.read()
    else:
        source = sys.stdin.buffer.read()
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as e:
        return {"error": "the source is not UTF-8: %s" % e}
    result = {"ruff_version": opts.get("version") or ""}
    if not result["ruff_version"]:
        rc, version, err = run([ruff, "--version"], b"")
        result["ruff_version"] = version.decode().strip() if rc == 0 else ""
    common = ["--no-cache", "--stdin-filename", opts["name"]]
    if opts.get("isolated"):
        common.append("--isolated")
    if opts.get("line_length"):
        common += ["--line-length", str(opts["line_length"])]

    if opts["mode"] == "format":
        rc, out, err = run([ruff, "format", *common, "-"], source)
        if rc != 0:
            return {"error": err or "ruff format exited with %d" % rc, **result}
        new = out.decode("utf-8")
        result["changed"] = new != text
        if not opts.get("check"):
            result["formatted"] = new
            result["diff"] = unified(text, new, opts["label"])
        if opts.get("write") and result["changed"]:
            write_back(path, new)
            result["written"] = True
        return result

    select = []
    if opts.get("select"):
        select = ["--select", ",".join(opts["select"])]
    rc, out, err = run([ruff, "check", "--output-format", "json", "--exit-zero", *select, *common, "-"], source)
    if rc != 0:
        return {"error": err or "ruff check exited with %d" % rc, **result}
    result["diagnostics"] = diagnostics(out)
    if opts.get("fix"):
        # With --fix on stdin, ruff prints the fixed source on stdout and the
        # diagnostics it could not fix, as JSON, on stderr.
        p = subprocess.run(
            [ruff, "check", "--fix", "--output-format", "json", "--exit-zero", *select, *common, "-"],
            input=source,
            capture_output=True,
        )
        if p.returncode != 0:
            return {"error": p.stderr.decode("utf-8", "replace").strip(), **result}
        fixed = p.stdout.decode("utf-8")
        result["fixed"] = fixed
        result["changed"] = fixed != text
        result["diff"] = unified(text, fixed, opts["label"])
        result["remaining"] = len(diagnostics(p.stderr))
        if opts.get("write") and result["changed"]:
            write_back(path, fixed)
            result["written"] = True
    return result


main()
