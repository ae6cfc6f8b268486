# coderun-rpc — build, test, fuzz, lint, bench, demo.
GO      ?= go
PYTHON  ?= python3
BIN     := bin/coderun-rpc
FUZZTIME ?= 3s
export CODERUN_RPC_BIN := $(CURDIR)/$(BIN)

# Test dependencies are installed by the targets that need them, so a fresh
# clone needs nothing before `make test`: a project-local virtual environment
# for pytest and mypy, and the TypeScript client's npm packages. Each is
# (re)installed when its manifest is newer than the stamp the install left.
VENV      := .venv
VENV_PY   := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed
TS_STAMP  := clients/ts/node_modules/.installed
# The real MCP peers of mcp/tests: the TypeScript SDK and server-everything (npm); the
# Python SDK and mcp-server-time come with requirements-test.txt.
MCP_STAMP := mcp/tests/node_modules/.installed
# The benchmark's references (a warm Jupyter kernel) in the same .venv: `make bench` only.
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: all build dist test test-lane-go test-lane-rest test-go test-e2e-sandbox test-fuzz test-py test-clients test-mcp test-install test-bench test-k8s lint fuzz bench bench-ab demo demo-mcp clean deps

all: build

# The sandbox's lean helper (cmd/coderun-sandbox-init) first, embedded into the daemon by the
# build tag sandboxinit (child/sandbox/leaninit says how it is used).
LEANINIT := child/sandbox/leaninit/coderun-sandbox-init

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(LEANINIT) ./cmd/coderun-sandbox-init
	$(GO) build -tags sandboxinit -o $(BIN) ./cmd/coderun-rpc

# Release artefacts in dist/: static binaries for linux/amd64 and linux/arm64, the npm
# packages, the wheels and sdist of coderun, SHA256SUMS (packaging/dist.py says what each is).
dist: $(TS_STAMP)
	$(PYTHON) packaging/dist.py --out dist

# The whole suite: Go (race), short fuzz runs, the Python child tests, the clients, installing
# the packages as a user would. Two lanes run at once, each in order: the Go suites, which wait
# on real children most of the time, beside everything else (about 1.1 CPUs in use with one
# lane). The second lane has a temporary directory of its own, so the Go suites' check that
# nothing new appears in the machine's temporary directory sees none of its daemons.
test: build deps
	$(MAKE) -j2 test-lane-go test-lane-rest

test-lane-go:
	$(MAKE) -j1 test-go test-e2e-sandbox

test-lane-rest:
	@tmp=$$(mktemp -d -t lane-rest.XXXXXX) && \
	TMPDIR=$$tmp $(MAKE) -j1 test-fuzz test-py test-clients test-mcp test-install test-bench test-k8s; \
	code=$$?; rm -rf $$tmp; exit $$code

# Some Go tests check rendered Python stubs with mypy from the project's .venv. The e2e suite's
# daemons run tier process here (E2E_ISOLATION unset), whatever the default finds.
test-go: $(VENV_STAMP)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

# The end-to-end suite again with every daemon in tier sandbox (a test that holds in one tier only
# says so and skips); without -race, which test-go's pass covers. Skipped where the kernel lacks a
# sandbox feature (`CODERUN_ISOLATION=sandbox coderun-rpc --check` says which). The packages tests need
# the uv that requirements-test.txt installs, hence the venv (so do the bench targets).
test-e2e-sandbox: build $(VENV_STAMP)
	@if CODERUN_ISOLATION=sandbox $(BIN) --check >/dev/null 2>&1; then \
		E2E_ISOLATION=sandbox $(GO) test -count=1 -timeout 30m ./e2e/; \
	else echo "test-e2e-sandbox: tier sandbox is not available here; skipped"; fi

# A short run of every fuzz target (FUZZTIME each). `make fuzz FUZZTIME=60s` for a long one.
test-fuzz fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz

test-py: $(VENV_STAMP)
	$(VENV_PY) -m pytest -q py/tests

test-clients: build $(VENV_STAMP) $(TS_STAMP)
	$(VENV_PY) -m pytest -q clients/python/tests
	cd clients/ts && npm test

# `coderun-rpc mcp` driven by the official Python and TypeScript MCP SDKs, with real upstreams.
test-mcp: build $(VENV_STAMP) $(MCP_STAMP)
	$(VENV_PY) -m pytest -q mcp/tests
	cd mcp/tests && npm test

# Builds this machine's packages, installs them into fresh projects and virtual environments
# without Go, and runs a program through each client; also checks the Dockerfile.
test-install: $(VENV_STAMP) $(TS_STAMP)
	$(VENV_PY) -m pytest -q packaging/tests

# deploy/kubernetes decoded strictly into the Kubernetes API's types (a module of its own).
test-k8s:
	cd deploy/kubernetes/validate && $(GO) vet ./... && $(GO) test -count=1 ./...

# Everything the tests need beyond Go, Python and Node.
deps: $(VENV_STAMP) $(TS_STAMP) $(MCP_STAMP)

$(VENV_STAMP): requirements-test.txt
	@test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --disable-pip-version-check -r requirements-test.txt
	@touch $@

$(BENCH_STAMP): bench/requirements.txt $(VENV_STAMP)
	$(VENV_PY) -m pip install -q --disable-pip-version-check -r bench/requirements.txt
	@touch $@

$(MCP_STAMP): mcp/tests/package.json mcp/tests/package-lock.json
	cd mcp/tests && npm ci --no-audit --no-fund
	@touch $@

$(TS_STAMP): clients/ts/package.json clients/ts/package-lock.json
	cd clients/ts && npm ci --no-audit --no-fund
	@touch $@

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The full benchmark: a table of daemon figures against the floor, saved under bench/results/;
# then the TypeScript adapters' cost per tool call over the client's own run (target: 1 ms).
# The workloads group runs its programs with the .venv's interpreter (pandas, matplotlib) next to
# a warm Jupyter kernel from the same .venv; the packages group uses the .venv's uv.
bench: build $(BENCH_STAMP) $(TS_STAMP)
	$(GO) run ./bench/cmd -daemon $(BIN)
	cd clients/ts && npm run bench:adapters

# A tiny-count run of the benchmark so it never rots (figures are meaningless at this size).
test-bench: build $(VENV_STAMP)
	$(GO) run ./bench/cmd -quick -daemon $(BIN)
	$(GO) run ./bench/cmd -quick -daemon $(BIN) -baseline $(BIN) -only '^(warm|bindings)$$'

# A same-run A/B of this checkout against another build of the daemon:
# `make bench-ab BASELINE=/path/to/old/coderun-rpc`.
bench-ab: build $(BENCH_STAMP)
	$(GO) run ./bench/cmd -daemon $(BIN) -baseline $(BASELINE)

# The demo's children use the project's .venv interpreter, which has matplotlib for step 4.
demo: build $(VENV_STAMP)
	CODERUN_PYTHON_BIN=$(CURDIR)/$(VENV_PY) $(PYTHON) examples/agent.py

# `coderun-rpc mcp` with server-everything and mcp-server-time upstream, driven by the Python
# SDK's client: prints the tool list a model sees and one run (docs/mcp.md).
demo-mcp: build $(VENV_STAMP) $(MCP_STAMP)
	$(VENV_PY) examples/mcp_demo.py

clean:
	rm -rf bin dist $(LEANINIT) $(VENV) clients/ts/node_modules clients/ts/dist mcp/tests/node_modules
