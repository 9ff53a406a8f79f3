# The peer row of pybench: the simplest MCP server a user could run instead
# of pyexec, as the py-executor seed builds it. Its one tool writes the code
# to a temp file and runs `python -u FILE` with subprocess.run, with the
# interpreter this server runs on. Started by pybench with a venv's python
# (the official `mcp` package installed there by uv) and driven by the same
# go-sdk client as pyexec's rows.
import os
import subprocess
import sys
import tempfile
import uuid

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

mcp = MCPServer("peer")


@mcp.tool()
def run_python(code: str, timeout: float = 30) -> dict:
    """Run Python code and return its output."""
    path = os.path.join(tempfile.gettempdir(), "peer-%s.py" % uuid.uuid4().hex)
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    try:
        p = subprocess.run([sys.executable, "-u", path], capture_output=True, text=True, timeout=timeout)
        return {"stdout": p.stdout, "stderr": p.stderr, "exit_code": p.returncode}
    except subprocess.TimeoutExpired as e:
        out, err = (x.decode("utf-8", "replace") if isinstance(x, bytes) else x or "" for x in (e.stdout, e.stderr))
        return {"stdout": out, "stderr": err, "exit_code": -1, "timed_out": True}
    finally:
        os.unlink(path)


if __name__ == "__main__":
    mcp.run()
