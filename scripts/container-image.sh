#!/usr/bin/env bash
# Builds the pyexec container image with podman where no image registry is
# reachable, then smoke-tests it: pyexec doctor with and without the
# sandbox's seccomp profile, and the README's container snippet driven by a
# real MCP client (go test ./cmd/pyexec -run TestREADMEClientSnippets/container).
#
#   bash scripts/container-image.sh            # build + smoke test
#   IMAGE=localhost/pyexec:dev SKIP_BUILD=1 bash scripts/container-image.sh
#
# The Dockerfile's two base images (golang:1.26-bookworm, debian:bookworm-slim)
# are made here from Debian packages with debootstrap and tagged under their
# usual names, so the Dockerfile builds unchanged. Needs: podman, buildah,
# debootstrap, runc (apt-get install podman buildah debootstrap runc).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-localhost/pyexec:dev}
WORK=${WORK:-/var/tmp/pyexec-image}
mkdir -p "$WORK"

# This machine's limits: crun refuses a cgroup v1/v2 hybrid, and the
# container may not raise RLIMIT_NOFILE/NPROC above the host's, which
# podman's defaults ask for. runc and lower default ulimits work.
cat > "$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=8192:8192", "nproc=8192:8192"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$WORK/containers.conf"

bases() {
	# The Debian mirror this machine's apt uses (MIRROR overrides it).
	local mirror=${MIRROR:-$(grep -rhoE '^(deb|URIs:) +[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | awk '{print $NF}' | grep -v security | head -1)}
	[ -d "$WORK/rootfs" ] || debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror"
	rm -rf "$WORK/rootfs-ca" && cp -a "$WORK/rootfs" "$WORK/rootfs-ca"
	# Registries are reached here through a TLS-inspecting proxy whose CA is
	# in /usr/local/share/ca-certificates; the stand-in bases trust it too.
	mkdir -p "$WORK/rootfs-ca/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$WORK/rootfs-ca/usr/local/share/ca-certificates/" 2>/dev/null || true
	tar -C "$WORK/rootfs-ca" -c . | podman import --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim
	rm -rf "$WORK/rootfs-ca"
	local ctr
	ctr=$(buildah from --pull=never docker.io/library/debian:bookworm-slim)
	buildah run --network host "$ctr" -- sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates git >/dev/null && rm -rf /var/lib/apt/lists/*'
	buildah copy "$ctr" "$(go env GOROOT)" /usr/local/go
	buildah config --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env GOTOOLCHAIN=local --env GOPATH=/go "$ctr"
	buildah commit "$ctr" docker.io/library/golang:1.26-bookworm
	buildah rm "$ctr"
}

if [ -z "${SKIP_BUILD:-}" ]; then
	podman image exists docker.io/library/golang:1.26-bookworm && podman image exists docker.io/library/debian:bookworm-slim || bases
	podman build --pull=never --network host --build-arg COMMIT="$(git rev-parse HEAD)" -t "$IMAGE" .
fi

echo "== pyexec version"
podman run --rm "$IMAGE" version

# Docker's default seccomp profile refuses namespaces to a process without
# CAP_SYS_ADMIN (clone with namespace flags, unshare, setns, clone3). podman's
# default, like deploy/container/seccomp.json, allows them. Show both.
python3 - "$WORK/seccomp-docker-like.json" <<'PY'
import json, sys
d = json.load(open("deploy/container/seccomp.json"))
for s in d["syscalls"]:
    if s["action"] == "SCMP_ACT_ALLOW" and not s.get("includes") and not s.get("args"):
        s["names"] = [n for n in s["names"] if n not in ("clone", "clone3", "unshare", "setns")]
d["syscalls"].append({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
    "args": [{"index": 0, "value": 0x7E020000, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]})
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
echo "== pyexec doctor, seccomp as Docker's default (no namespaces)"
podman run --rm --security-opt seccomp="$WORK/seccomp-docker-like.json" "$IMAGE" doctor | sed -n '/^confinement/,/^$/p'
echo "== pyexec doctor, --security-opt seccomp=deploy/container/seccomp.json"
podman run --rm --security-opt seccomp=deploy/container/seccomp.json "$IMAGE" doctor | sed -n '/^confinement/,/^$/p'

echo "== README container snippet, driven by a real MCP client"
PYEXEC_TEST_IMAGE="$IMAGE" PYEXEC_CONTAINER_CLI=podman PYEXEC_SECCOMP_PROFILE="$PWD/deploy/container/seccomp.json" \
	go test -count=1 -v -run 'TestREADMEClientSnippets/container' ./cmd/pyexec
