# pyexec: `make run` builds and serves MCP over stdio; `make test` runs every test.
GO      ?= go
BIN     ?= bin/pyexec
PYTHON  ?= python3
# Stamp the commit into the binary (pyexec version); the Go toolchain's own
# record is off where GOFLAGS has -buildvcs=false.
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS ?= -X github.com/pyexec/pyexec/internal/buildinfo.commit=$(COMMIT)
# The release targets: every one is cross-compiled and vetted by make cross.
TARGETS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
GORELEASER ?= $(GO) run github.com/goreleaser/goreleaser/v2@v2.15.1

.PHONY: build run test deps vet conformance deploy-check cross release-snapshot mcpb packaging-check image

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pyexec

# uv resolves dependencies; runs without dependencies work without it.
# The MCP Tasks end-to-end test drives pyexec with the official TypeScript
# SDK (pinned in its package-lock.json); npm's cache keeps reinstalls local.
TASKS_CLIENT = cmd/pyexec/testdata/tasks-client

deps:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@uv --version
	@if command -v npm >/dev/null 2>&1; then \
		test -d $(TASKS_CLIENT)/node_modules/@modelcontextprotocol/sdk || \
		npm ci --prefix $(TASKS_CLIENT) --prefer-offline --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the MCP Tasks client test will be skipped"; fi

run: build
	./$(BIN) mcp

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt: files above need formatting" && exit 1)

test: deps vet
	$(GO) test -count=1 -timeout 20m ./...

# Cross-compile and vet every release target (CI runs only Linux: this is
# what keeps the other platforms building).
cross:
	@set -e; for t in $(TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; echo "== $$os/$$arch: build, vet"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -o /dev/null ./cmd/pyexec; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) vet ./...; \
	done

# Release archives and checksums for every target into dist/, without a tag
# and without publishing (GoReleaser from the Go module proxy).
release-snapshot:
	PYEXEC_COMMIT=$(COMMIT) PYEXEC_SHORT_COMMIT=$$(git rev-parse --short=12 HEAD) PYEXEC_COMMIT_DATE=$$(git log -1 --format=%cI) \
		$(GORELEASER) release --snapshot --clean

# MCP Bundles (.mcpb) for every release target into dist/mcpb/ (npm's
# @anthropic-ai/mcpb CLI: validate, then pack).
mcpb:
	bash scripts/mcpb.sh

# server.json against the MCP registry schema, the bundle manifest, and the
# systemd unit (systemd-analyze verify).
packaging-check:
	bash scripts/check-packaging.sh

# The container image, built with podman from Debian packages where no
# image registry is reachable, and its MCP smoke test.
image:
	bash scripts/container-image.sh

# The official MCP conformance suite against `pyexec serve`'s /mcp (needs npm).
conformance:
	bash scripts/conformance.sh

# Helm chart (helm lint and template, helm built from its Go module), the
# compose file and nginx.conf; no cluster or container engine needed.
deploy-check:
	bash scripts/deploycheck.sh
