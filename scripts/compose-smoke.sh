#!/usr/bin/env bash
# Runs deploy/compose/compose.yaml for real with podman and podman-compose:
# PostgreSQL, three pyexec replicas and nginx, every image built here from
# Debian packages (no image registry needed), then smoke-tests it through
# nginx and takes it down again:
#
#   - sync runs: every one correct, all three replicas answer, as nobody;
#   - a background job submitted on one replica and read to the end, by
#     one cursor, from the others;
#   - the MCP endpoint: initialize, tools/list and run_python over
#     Streamable HTTP, the session's requests round-robined by nginx;
#   - a live Python session whose cells land on every replica and run in
#     the one interpreter that holds it;
#   - files: an upload read by runs on every replica, and a run's file
#     downloaded through any of them (the replicas share one workspace);
#   - kill -9 of the replica running a job: the job is failed node_lost
#     by another replica within the bound, its output so far readable.
#
#   bash scripts/compose-smoke.sh
#   KEEP=1 bash scripts/compose-smoke.sh      # leave the stack running
#
# Images: IMAGE (default localhost/pyexec:dev) is built with
# scripts/container-image.sh when missing; this checkout's pyexec binary is
# then layered onto it as localhost/pyexec:smoke, so the stack runs the code
# you have (SMOKE_BINARY=image runs IMAGE as it is). PostgreSQL and nginx
# come from deploy/compose/images/*/Containerfile (Debian packages), built
# once. Needs podman, buildah, debootstrap, runc (apt) and podman-compose
# (installed from the package registry into a venv under WORK when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
IMAGE=${IMAGE:-localhost/pyexec:dev}
WORK=${WORK:-/var/tmp/pyexec-image}
PG_IMAGE=${PG_IMAGE:-localhost/pyexec-postgres:15}
NGINX_IMAGE=${NGINX_IMAGE:-localhost/pyexec-nginx:1}
PROJECT=${PROJECT:-pyexecsmoke}
LOST_AFTER=${LOST_AFTER:-15}
mkdir -p "$WORK"

# The same engine settings as scripts/container-image.sh (runc, ulimits
# this machine allows).
cat >"$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=8192:8192", "nproc=8192:8192"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$WORK/containers.conf"

for t in podman buildah; do
	command -v "$t" >/dev/null || { echo "compose-smoke: $t is missing (apt-get install podman buildah debootstrap runc)" >&2; exit 2; }
done
COMPOSE=${COMPOSE:-$WORK/compose-venv/bin/podman-compose}
if [ ! -x "$COMPOSE" ]; then
	echo "== installing podman-compose into $WORK/compose-venv"
	python3 -m venv "$WORK/compose-venv"
	"$WORK/compose-venv/bin/pip" install -q podman-compose==1.6.0
fi

t0=$(date +%s)
echo "== images"
podman image exists "$IMAGE" || IMAGE=$IMAGE bash scripts/container-image.sh
podman image exists "$PG_IMAGE" || podman build --pull=never --network host -t "$PG_IMAGE" deploy/compose/images/postgres
podman image exists "$NGINX_IMAGE" || podman build --pull=never --network host -t "$NGINX_IMAGE" deploy/compose/images/nginx
RUN_IMAGE=$IMAGE
if [ "${SMOKE_BINARY:-checkout}" != image ]; then
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/pyexec/pyexec/internal/buildinfo.commit=$(git rev-parse HEAD)" \
		-o "$WORK/pyexec-smoke" ./cmd/pyexec
	ctr=$(buildah from --pull=never "$IMAGE")
	buildah copy "$ctr" "$WORK/pyexec-smoke" /usr/local/bin/pyexec >/dev/null
	buildah commit -q "$ctr" localhost/pyexec:smoke >/dev/null
	buildah rm "$ctr" >/dev/null
	RUN_IMAGE=localhost/pyexec:smoke
fi
echo "   $(podman run --rm "$RUN_IMAGE" version)"

# The compose directory as a user would set it up, in a temp copy so the
# checkout gets no secrets and another stack's .env is never touched.
dir=$(mktemp -d /tmp/pyexec-compose.XXXXXX)
cp deploy/compose/compose.yaml deploy/compose/nginx.conf "$dir/"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$(openssl rand -hex 24)
openssl rand -hex 16 | tr -d '\n' >"$dir/pg-password.txt"
printf 'postgres://pyexec:%s@postgres:5432/pyexec?sslmode=disable' "$(cat "$dir/pg-password.txt")" >"$dir/store-url.txt"
cat >"$dir/.env" <<ENV
PYEXEC_TOKEN=$token
PYEXEC_IMAGE=$RUN_IMAGE
POSTGRES_IMAGE=$PG_IMAGE
NGINX_IMAGE=$NGINX_IMAGE
PYEXEC_PORT=$port
ENV
sed -i "s/PYEXEC_NODE_LOST_AFTER: \"15\"/PYEXEC_NODE_LOST_AFTER: \"$LOST_AFTER\"/" "$dir/compose.yaml"

compose() { (cd "$dir" && "$COMPOSE" -p "$PROJECT" "$@"); }
down() {
	if [ -n "${KEEP:-}" ]; then
		echo "== left running: cd $dir && $COMPOSE -p $PROJECT down -v   (http://127.0.0.1:$port, token in $dir/.env)"
		return
	fi
	compose down -v -t 5 >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap down EXIT

echo "== up (project $PROJECT, nginx on 127.0.0.1:$port)"
compose down -v -t 5 >/dev/null 2>&1 || true
up0=$(date +%s.%N)
compose up -d >"$dir/up.log" 2>&1 || { grep -v 'systemd connection' "$dir/up.log" >&2; exit 1; }

PYEXEC_URL=http://127.0.0.1:$port PYEXEC_TOKEN=$token PROJECT=$PROJECT UP0=$up0 LOST_AFTER=$LOST_AFTER \
	python3 - <<'PY'
import json, os, subprocess, sys, time, urllib.error, urllib.request

base, token, project = os.environ["PYEXEC_URL"], os.environ["PYEXEC_TOKEN"], os.environ["PROJECT"]
lost_after = float(os.environ["LOST_AFTER"])

def req(method, path, body=None, headers=None, timeout=60):
    h = {"Authorization": "Bearer " + token}
    if body is not None:
        h["Content-Type"] = "application/json"
        body = json.dumps(body).encode()
    h.update(headers or {})
    r = urllib.request.Request(base + path, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

def psql(sql):
    out = subprocess.run(["podman", "exec", project + "_postgres_1", "psql", "-U", "pyexec", "-d", "pyexec", "-Atc", sql],
                         check=True, capture_output=True, text=True).stdout
    return [l.split("|") for l in out.splitlines() if l]

# Ready: every replica answers through nginx, 12 answers in a row.
deadline, nodes, row = time.time() + 180, set(), 0
while len(nodes) < 3 or row < 12:
    check(time.time() < deadline, f"replicas behind nginx within 180 s (saw {sorted(nodes)})")
    try:
        code, h, _ = req("GET", "/health", timeout=5)
    except OSError:
        code = 0
    if code == 200 and h.get("X-Pyexec-Node"):
        nodes.add(h["X-Pyexec-Node"])
        row += 1
    else:
        row = 0
        time.sleep(0.2)
print(f"ready: 3 replicas behind nginx {time.time() - float(os.environ['UP0']):.1f} s after compose up")

# 1. Sync runs.
n, seen, lat = 60, set(), []
for i in range(n):
    t = time.time()
    code, h, b = req("POST", "/v1/run", {"code": f"import os; print({i} * 7, os.getuid())"})
    lat.append(time.time() - t)
    r = json.loads(b)
    check(code == 200 and r.get("stdout") == f"{i * 7} 65534\n", f"sync run {i}: {code} {b[:300]!r}")
    seen.add(h["X-Pyexec-Node"])
check(len(seen) == 3, f"sync runs reached {len(seen)} replicas, want 3")
lat.sort()
print(f"sync: {n} runs through nginx correct, as uid 65534 (nobody), on all 3 replicas; median {lat[n // 2] * 1000:.1f} ms")

# 2. A job submitted on one replica, read by one cursor from the others.
code, h, b = req("POST", "/v1/jobs", {"code": "import time\nfor i in range(20):\n    print('line', i, flush=True)\n    time.sleep(0.1)"})
check(code == 202, f"start job: {code} {b[:300]!r}")
job, submitted_on = json.loads(b)["job_id"], h["X-Pyexec-Node"]
out, so, readers = "", 0, set()
for _ in range(200):
    code, h, b = req("GET", f"/v1/jobs/{job}/output?stdout_offset={so}&wait=5")
    c = json.loads(b)
    check(code == 200 and c["next_stdout_offset"] >= so, f"output read: {code} {b[:300]!r}")
    out += c["stdout"]
    so = c["next_stdout_offset"]
    if h["X-Pyexec-Node"] != submitted_on:
        readers.add(h["X-Pyexec-Node"])
    if c["done"]:
        break
want = "".join(f"line {i}\n" for i in range(20))
check(out == want, f"job output read across replicas: {out!r}")
check(readers, "no read reached another replica")
print(f"job: submitted on {submitted_on}, its 20 lines read by one cursor, {len(readers)} other replica(s) served reads")

# 3. MCP over Streamable HTTP.
mh = {"Accept": "application/json, text/event-stream"}
def mcp(msg, sid=None):
    hh = dict(mh)
    if sid:
        hh["Mcp-Session-Id"] = sid
    code, h, b = req("POST", "/mcp", msg, hh)
    text = b.decode()
    if "text/event-stream" in (h.get("Content-Type") or ""):
        text = "\n".join(l[5:].strip() for l in text.splitlines() if l.startswith("data:"))
    return code, h, (json.loads(text.splitlines()[-1]) if text.strip() else None)
code, h, r = mcp({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "compose-smoke", "version": "1"}}})
check(code == 200 and r and "result" in r, f"mcp initialize: {code} {r}")
sid = h.get("Mcp-Session-Id")
check(sid, "mcp initialize returned no Mcp-Session-Id")
mcp({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
code, h, r = mcp({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid)
tools = [t["name"] for t in r["result"]["tools"]]
check("run_python" in tools, f"tools/list: {tools}")
nodes = set()
for i in range(3):
    code, h, r = mcp({"jsonrpc": "2.0", "id": 3 + i, "method": "tools/call", "params": {"name": "run_python", "arguments": {"code": f"print(6 * {i + 7})"}}}, sid)
    check(code == 200 and r and "result" in r and not r["result"].get("isError"), f"run_python: {code} {r}")
    check(str(6 * (i + 7)) in json.dumps(r["result"]), f"run_python result: {r}")
    nodes.add(h.get("X-Pyexec-Node"))
print(f"mcp: initialize, tools/list ({len(tools)} tools), 3 run_python calls in one session (answered via {len(nodes)} replica(s))")

# 3b. A live Python session: created through nginx, its cells land on any
# replica and are forwarded to the one that holds it.
code, h, b = req("POST", "/v1/sessions", {"session": "smoke"})
check(code == 201, f"create session: {code} {b[:300]!r}")
nodes = set()
for i in range(6):
    code, h, b = req("POST", "/v1/sessions/smoke/run", {"code": "n = globals().get('n', 0) + 1\nprint(n)"})
    r = json.loads(b)
    check(code == 200 and r.get("stdout") == f"{i + 1}\n" and r.get("execution_count") == i + 1, f"session cell {i}: {code} {b[:300]!r}")
    nodes.add(h.get("X-Pyexec-Node"))
code, h, b = req("DELETE", "/v1/sessions/smoke")
check(code in (200, 204), f"close session: {code} {b[:200]!r}")
print(f"session: 6 cells kept their state in one interpreter, the calls answered via {len(nodes)} replica(s)")

# 3c. Files: the replicas share one workspace volume, so a file uploaded
# through nginx is read by runs on every replica, and one a run writes is
# downloaded through any of them.
r = urllib.request.Request(base + "/v1/files/smoke/in.csv", data=b"a,b\n1,2\n3,4\n", method="PUT",
                           headers={"Authorization": "Bearer " + token, "Content-Type": "application/octet-stream"})
with urllib.request.urlopen(r, timeout=60) as resp:
    check(resp.status in (200, 201), f"upload: {resp.status}")
nodes = set()
for i in range(12):
    code, h, b = req("POST", "/v1/run", {"code": "import csv\nrows = list(csv.DictReader(open('smoke/in.csv')))\nprint(sum(int(r['b']) for r in rows))"})
    r = json.loads(b)
    check(code == 200 and r.get("stdout") == "6\n", f"run reading the upload {i}: {code} {b[:300]!r}")
    nodes.add(h.get("X-Pyexec-Node"))
check(len(nodes) == 3, f"runs reading the upload reached {len(nodes)} replicas, want 3")
code, h, b = req("POST", "/v1/run", {"code": "open('smoke/out.txt', 'w').write('made by ' + __import__('socket').gethostname())"})
check(code == 200, f"run writing a file: {code} {b[:300]!r}")
got = set()
for i in range(9):
    code, h, b = req("GET", "/v1/files/smoke/out.txt")
    check(code == 200 and b.startswith(b"made by "), f"download {i}: {code} {b[:200]!r}")
    got.add(h.get("X-Pyexec-Node"))
print(f"files: an upload read by runs on all 3 replicas; a run's file downloaded through {len(got)} replica(s)")

# 4. kill -9 of the replica running a job.
code, h, b = req("POST", "/v1/jobs", {"code": "import time\ni = 0\nwhile True:\n    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.05)"})
job = json.loads(b)["job_id"]
deadline = time.time() + 30
while True:
    code, h, b = req("GET", f"/v1/jobs/{job}/output?wait=2")
    c = json.loads(b)
    if c["stdout"].count("\n") >= 5:
        break
    check(time.time() < deadline, f"the ticking job printed nothing: {c}")
(owner,), = psql(f"SELECT owner FROM pyexec_jobs WHERE id = '{job}'")
(addr,), = psql(f"SELECT addr FROM pyexec_nodes WHERE id = '{owner}'")
victim = addr.split("//")[1].split(":")[0]  # http://pyexec-2:8080 -> pyexec-2
container = f"{project}_{victim}_1"
subprocess.run(["podman", "kill", "--signal", "KILL", container], check=True, capture_output=True)
killed = time.time()
print(f"kill: {container} (node {owner}) killed with SIGKILL while running job {job}")
before_epoch = psql(f"SELECT epoch FROM pyexec_jobs WHERE id = '{job}'")[0][0]
while True:
    code, h, b = req("GET", f"/v1/jobs/{job}", timeout=10)
    j = json.loads(b) if code == 200 else {}
    if j.get("status") == "failed":
        break
    check(time.time() - killed < lost_after * 3 + 10, f"job not failed {lost_after * 3 + 10:.0f} s after its node died: {code} {b[:300]!r}")
    time.sleep(0.2)
took = time.time() - killed
check(j.get("error", "").startswith("node_lost"), f"job error: {j.get('error')!r}")
(epoch,), = psql(f"SELECT epoch FROM pyexec_jobs WHERE id = '{job}'")
check(epoch == before_epoch == "1", f"job claimed again: epoch {before_epoch} -> {epoch}")
code, h, b = req("GET", f"/v1/jobs/{job}/output")
c = json.loads(b)
# Runs are unbuffered (PYTHONUNBUFFERED=1): the last flush may end mid-line.
ticks = c["stdout"].split("\n")
whole, last = ticks[:-1], ticks[-1]
check(c["done"] and whole and all(t == f"tick {i}" for i, t in enumerate(whole)) and f"tick {len(whole)}".startswith(last),
      f"output after node loss: {c['stdout'][-200:]!r}")
ticks = whole
print(f"node_lost: job failed {took:.1f} s after the kill (bound {lost_after:.0f} s), error {j['error'][:60]!r}; "
      f"{len(ticks)} ticks readable from {h['X-Pyexec-Node']}, epoch 1 (never claimed twice)")
code, h, b = req("POST", "/v1/run", {"code": "print('after')"})
check(code == 200 and json.loads(b)["stdout"] == "after\n", f"sync run after the kill: {code} {b[:200]!r}")
print("after: sync runs still answered through nginx")

# 5. The killed replica restarted: it rejoins as a new node, nginx reaches
# it again (same address), and the dead node leaves nothing behind.
before = {r[0] for r in psql("SELECT id FROM pyexec_nodes")}
subprocess.run(["podman", "start", container], check=True, capture_output=True)
started = time.time()
while True:
    nodes = {r[0] for r in psql("SELECT id FROM pyexec_nodes")}
    new = nodes - before - {owner}
    if new:
        break
    check(time.time() - started < 120, f"{container} did not rejoin within 120 s")
    time.sleep(0.5)
(newid,) = new
while True:
    code, h, _ = req("GET", "/health", timeout=5)
    if h.get("X-Pyexec-Node") == newid:
        break
    check(time.time() - started < 120, f"nginx never reached the restarted {container} ({newid})")
while owner in {r[0] for r in psql("SELECT id FROM pyexec_nodes")}:
    check(time.time() - started < lost_after * 3 + 30, f"the dead node {owner} was never dropped")
    time.sleep(0.5)
(left,), = psql(f"SELECT count(*) FROM pyexec_jobs WHERE owner = '{owner}' AND status IN ('pending', 'running')")
check(left == "0", f"{left} unfinished jobs of the dead node")
print(f"rejoin: {container} restarted as node {newid}, reached through nginx {time.time() - started:.1f} s later; "
      f"the dead node's row dropped, no unfinished jobs of it")
PY
echo "== compose smoke passed in $(($(date +%s) - t0)) s"
