# coderun-rpc — build, test, fuzz, lint, bench, demo.
GO      ?= go
PYTHON  ?= python3
BIN     := bin/coderun-rpc
FUZZTIME ?= 5s
export CODERUN_RPC_BIN := $(CURDIR)/$(BIN)

.PHONY: all build test test-go test-fuzz test-py test-clients test-bench lint fuzz bench demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/coderun-rpc

# The whole suite: Go (race), short fuzz runs, the Python child tests, the clients.
test: build test-go test-fuzz test-py test-clients test-bench

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# A short run of every fuzz target (FUZZTIME each). `make fuzz FUZZTIME=60s` for a long one.
test-fuzz fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz

test-py:
	@if [ -d py/tests ]; then $(PYTHON) -m pytest -q py/tests; fi

test-clients: build
	@if [ -f clients/python/tests/conftest.py ]; then $(PYTHON) -m pytest -q clients/python/tests; fi
	@if [ -f clients/ts/package.json ]; then cd clients/ts && npm test; fi

lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The full benchmark: a table of daemon figures against the floor, saved under bench/results/.
bench: build
	$(GO) run ./bench/cmd -daemon $(BIN)

# A tiny-count run of the benchmark so it never rots (figures are meaningless at this size).
test-bench: build
	$(GO) run ./bench/cmd -quick -daemon $(BIN)

demo: build
	@if [ -f examples/agent.py ]; then $(PYTHON) examples/agent.py; else echo "make demo: not yet (the daemon cannot serve a run yet)"; fi

clean:
	rm -rf bin
