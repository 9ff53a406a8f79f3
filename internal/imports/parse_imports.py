"""pyexec's import scanner: which top-level modules a script imports and which of them are missing.

Run by the server through its engine, confined like any run (strict sandbox,
as the run user), with the interpreter the script itself will use. The
script's source is never executed: it is parsed with ast. The source is the
file named in argv[1] (read here, inside the sandbox) or stdin. argv[2] is a
directory to search for local modules besides the script's own (the run's
cwd). One JSON object is printed: {"imports": [...], "missing": [...],
"metadata": whether it has a PEP 723 block} or {"error": "..."}.
"""

import ast
import importlib.util
import json
import os
import re
import sys


def top_level_imports(tree):
    """Module-level import statements, and those in top-level if blocks
    (not `if TYPE_CHECKING:`). Imports in try blocks are optional by
    convention (try: import ujson / except ImportError) and are skipped, as
    are relative imports and imports inside functions and classes."""
    names = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import):
                names.extend(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module:
                    names.append(node.module.split(".")[0])
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test) if hasattr(ast, "unparse") else ""
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                    visit(node.orelse)

    visit(tree.body)
    seen, out = set(), []
    for n in names:
        if n and n not in seen:
            seen.add(n)
            out.append(n)
    return out


def main():
    path, local = sys.argv[1], sys.argv[2]
    try:
        if path:
            with open(path, "rb") as f:
                source = f.read()
            sys.path.insert(0, os.path.dirname(path))
        else:
            source = sys.stdin.buffer.read()
        tree = ast.parse(source)
    except SyntaxError as e:
        print(json.dumps({"error": "cannot parse the script: %s (line %s)" % (e.msg, e.lineno)}))
        return
    except (OSError, ValueError) as e:
        print(json.dumps({"error": "cannot read the script: %s" % e}))
        return
    if local:
        sys.path.insert(0, local)
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | set(sys.builtin_module_names)
    imports = top_level_imports(tree)
    missing = []
    for name in imports:
        if name in stdlib or name == "__future__":
            continue
        try:
            # Top-level names only: find_spec locates a module without
            # importing it (no package code runs).
            if importlib.util.find_spec(name) is not None:
                continue
        except (ImportError, ValueError):
            pass
        missing.append(name)
    # A PEP 723 block declares the script's dependencies itself.
    metadata = re.search(rb"(?m)^# /{3} script\s*$", source) is not None
    print(json.dumps({"imports": imports, "missing": missing, "metadata": metadata}))


main()
