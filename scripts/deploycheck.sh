#!/usr/bin/env bash
# Checks the deployment files without a cluster or a container engine:
# the Helm chart with `helm lint` and `helm template` (helm built from its
# Go module), the rendered manifests and the compose file parsed and
# checked for what the docs promise, and nginx.conf with `nginx -t` when
# nginx is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_VERSION=v3.22.0
helm() { go run "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$@"; }
chart=deploy/helm/pyexec
vals=(--set store.url=postgres://pyexec@db:5432/pyexec --set auth.token=t0ken)

echo "== helm lint"
helm lint --strict "$chart" "${vals[@]}"
if helm template r "$chart" >/dev/null 2>&1; then
	echo "helm template without a store URL and a token should fail" >&2
	exit 1
fi
echo "== helm template"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
helm template r "$chart" "${vals[@]}" >"$out"
PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || PY=python3
$PY - "$out" deploy/compose/compose.yaml <<'PYEOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = sorted(d["kind"] for d in docs)
want = ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Secret", "Service"]
assert kinds == want, f"rendered kinds {kinds}, want {want}"
dep = next(d for d in docs if d["kind"] == "Deployment")
c = dep["spec"]["template"]["spec"]["containers"][0]
assert c["readinessProbe"]["httpGet"]["path"] == "/health"
assert c["livenessProbe"]["httpGet"]["path"] == "/health"
assert "--store-file" in c["args"], "the store URL must come from the Secret's file"
assert not any("postgres://" in a for a in c["args"]), "no database URL on the command line"
env = {e["name"]: e for e in c["env"]}
assert "secretKeyRef" in env["PYEXEC_TOKEN"]["valueFrom"]
# What the sandbox was seen to need in a real run (scripts/compose-smoke.sh).
need = {"SETUID", "SETGID", "SYS_ADMIN", "SETPCAP", "SETFCAP", "KILL"}
assert need <= set(c["securityContext"]["capabilities"]["add"]), c["securityContext"]["capabilities"]
compose = yaml.safe_load(open(sys.argv[2]))
svcs = compose["services"]
replicas = [n for n in svcs if n.startswith("pyexec-")]
assert len(replicas) == 3 and "postgres" in svcs and "nginx" in svcs, sorted(svcs)
for n in replicas:
    cmd = svcs[n]["command"]
    assert "--store-file" in cmd and f"http://{n}:8080" in cmd, (n, cmd)
    assert "store-url" in svcs[n]["secrets"], n
    assert need <= set(svcs[n]["cap_add"]), (n, svcs[n]["cap_add"])
print(f"manifests: {', '.join(kinds)}; compose: {', '.join(sorted(svcs))}")
PYEOF
if command -v nginx >/dev/null 2>&1; then
	echo "== nginx -t"
	conf=$(mktemp -d)
	sed 's/pyexec-[123]:8080/127.0.0.1:8080/' deploy/compose/nginx.conf >"$conf/nginx.conf"
	nginx -t -q -c "$conf/nginx.conf" -g "pid $conf/nginx.pid; error_log $conf/error.log;"
	rm -rf "$conf"
else
	echo "== nginx not installed: nginx.conf not checked"
fi
