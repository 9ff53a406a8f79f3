# pyexec: `make run` builds and serves MCP over stdio; `make test` runs every test.
GO      ?= go
BIN     ?= bin/pyexec
PYTHON  ?= python3

.PHONY: build run test deps vet conformance deploy-check

build:
	$(GO) build -o $(BIN) ./cmd/pyexec

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

# The official MCP conformance suite against `pyexec serve`'s /mcp (needs npm).
conformance:
	bash scripts/conformance.sh

# Helm chart (helm lint and template, helm built from its Go module), the
# compose file and nginx.conf; no cluster or container engine needed.
deploy-check:
	bash scripts/deploycheck.sh
