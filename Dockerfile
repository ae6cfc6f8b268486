# coderun-rpc in a container: the daemon (a static Go binary) on a slim CPython image.
#
#   docker build -t coderun-rpc --build-arg VERSION=0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run -i --rm coderun-rpc          # speaks JSON-RPC on stdin/stdout
#
# Stage 1 builds the binary as `make dist` does (CGO off, -trimpath, stripped, stamped, the
# sandbox's lean init built first and embedded).
FROM golang:1.26-bookworm AS build
ARG VERSION=0.1.0
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" \
      -o child/sandbox/leaninit/coderun-sandbox-init ./cmd/coderun-sandbox-init
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags sandboxinit \
      -ldflags "-s -w -X github.com/coderun-rpc/coderun-rpc/internal/buildinfo.version=${VERSION} -X github.com/coderun-rpc/coderun-rpc/internal/buildinfo.commit=${COMMIT}" \
      -o /out/coderun-rpc ./cmd/coderun-rpc

# Stage 2: the interpreter the daemon runs programs with, the binary, and nothing else.
FROM python:3.12-slim-bookworm
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin coderun
COPY --from=build /out/coderun-rpc /usr/local/bin/coderun-rpc
USER coderun
WORKDIR /home/coderun
ENV CODERUN_PYTHON_BIN=/usr/local/bin/python3
HEALTHCHECK --interval=60s --timeout=20s --start-period=5s --retries=3 CMD ["coderun-rpc", "--check"]
ENTRYPOINT ["coderun-rpc"]
