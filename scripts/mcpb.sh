#!/usr/bin/env bash
# Packs one MCP Bundle per release target: dist/mcpb/pyexec-VERSION-OS-ARCH.mcpb
# (deploy/mcpb/manifest.json, narrowed to the target's platform, plus that
# target's static binary), each checked with `mcpb validate` before `mcpb pack`.
#   bash scripts/mcpb.sh [linux/amd64 darwin/arm64 ...]   (default: every release target)
# Needs Node.js and npm: the @anthropic-ai/mcpb CLI is installed into NPM_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_DIR=${NPM_DIR:-/var/tmp/pyexec-npm}
MCPB_VERSION=${MCPB_VERSION:-2.1.2}
if [ ! -x "$NPM_DIR/node_modules/.bin/mcpb" ]; then
	mkdir -p "$NPM_DIR"
	npm install --prefix "$NPM_DIR" --no-audit --no-fund --silent "@anthropic-ai/mcpb@$MCPB_VERSION"
fi
MCPB="$NPM_DIR/node_modules/.bin/mcpb"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)
version=$(python3 -c 'import json; print(json.load(open("deploy/mcpb/manifest.json"))["version"])')
commit=$(git rev-parse HEAD 2>/dev/null || true)
out=dist/mcpb
mkdir -p "$out"
for t in "${targets[@]}"; do
	os=${t%/*} arch=${t#*/}
	stage=$(mktemp -d)
	mkdir -p "$stage/server"
	exe=pyexec
	[ "$os" = windows ] && exe=pyexec.exe
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
		-ldflags "-s -w -X github.com/pyexec/pyexec/internal/buildinfo.version=$version -X github.com/pyexec/pyexec/internal/buildinfo.commit=$commit" \
		-o "$stage/server/$exe" ./cmd/pyexec
	# The manifest for this target: its platform only, and off Linux the
	# sandbox defaults to none (the only policy pyexec can enforce there).
	python3 - "$os" deploy/mcpb/manifest.json "$stage/manifest.json" <<'PY'
import json, sys
goos, src, dst = sys.argv[1:]
m = json.load(open(src))
plat = {"linux": "linux", "darwin": "darwin", "windows": "win32"}[goos]
m["compatibility"]["platforms"] = [plat]
if goos == "windows":
    m["server"]["entry_point"] = "server/pyexec.exe"
if goos != "linux":
    m["user_config"]["sandbox"]["default"] = "none"
json.dump(m, open(dst, "w"), indent=2)
PY
	cp README.md "$stage/"
	"$MCPB" validate "$stage/manifest.json"
	"$MCPB" pack "$stage" "$out/pyexec-$version-$os-$arch.mcpb"
	rm -rf "$stage"
done
( cd "$out" && sha256sum ./*.mcpb > checksums.txt && cat checksums.txt )
