# pyexec container image: the pyexec binary, CPython and uv, nothing else.
#
#   docker build -t pyexec .
#   docker run -i --rm -v "$PWD:/workspace" --user "$(id -u):$(id -g)" \
#     --security-opt seccomp=deploy/container/seccomp.json pyexec mcp
#
# deploy/compose and deploy/helm run the same image as replicas of
# `pyexec serve` (their own command, user and security settings).
#
# The sandbox needs user, mount and network namespaces, Landlock and seccomp
# inside the container: see README.md, "Container image", for the flags and
# what `pyexec doctor` reports with and without them. The base images are
# build arguments so an offline builder can supply its own (the repository's
# scripts/container-build.sh makes both from Debian packages).
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim

# --- build: a static pyexec (the job store is pure Go, so no cgo) ---------
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/pyexec/pyexec/internal/buildinfo.version=${VERSION} -X github.com/pyexec/pyexec/internal/buildinfo.commit=${COMMIT}" \
      -o /out/pyexec ./cmd/pyexec

# --- uv: the package registry's uv wheel ships a static binary -----------
FROM ${BASE_IMAGE} AS uv
ARG UV_VERSION=0.13.9
# Debian stable's packages are not pinned: its point releases carry the
# security fixes the image should get when rebuilt.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}" \
 && /opt/uv/bin/uv --version

# --- runtime: CPython, uv, pyexec; runs as an unprivileged user -----------
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --home-dir /home/pyexec --create-home --shell /usr/sbin/nologin pyexec \
 && mkdir -p /workspace /var/lib/pyexec \
 && chown pyexec:pyexec /workspace /var/lib/pyexec \
 && chmod 1777 /home/pyexec
COPY --from=uv /opt/uv/bin/uv /usr/local/bin/uv
COPY --from=build /out/pyexec /usr/local/bin/pyexec
# HOME is world-writable (sticky) so `--user "$(id -u):$(id -g)"`, which
# makes a mounted workspace writable as its owner, still has a state dir.
ENV HOME=/home/pyexec \
    PYEXEC_PYTHON=/usr/bin/python3 \
    UV_PYTHON_DOWNLOADS=never
USER 10001:10001
WORKDIR /workspace
VOLUME ["/workspace"]
# pyexec serve (deploy/compose, deploy/helm) listens here; pyexec mcp needs no port.
EXPOSE 8080
ENTRYPOINT ["pyexec"]
CMD ["mcp"]
