//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/child/sandbox/leaninit"
	"golang.org/x/sys/unix"
)

// The helper binary is what the sandbox's stages run from: the init of a
// run, the fork init of a forked run, the exec stage (which the init starts
// from its own /proc/self/exe, so from the same binary) and the namespace
// probes; the daemon runs its watchdog from it too (HelperPath), in either
// tier. It is the lean cmd/coderun-sandbox-init when the daemon carries
// its image (child/sandbox/leaninit; `make build` embeds it), otherwise the
// binary this package is in, re-executed through /proc/self/exe.
//
// Why the lean binary: every start of a Go binary runs all its package
// initialisation before main can dispatch; the daemon's (JSON Schema
// meta-schemas, Prometheus, OpenTelemetry, gRPC, protobuf, YAML…) costs
// more CPU than the sandbox's namespaces, and a sandboxed run starts the
// helper at least once. The lean one links child/sandbox and what it
// needs, nothing else.
//
// Why embedded and run from a sealed memory file rather than a second file
// next to the daemon: a release stays one self-contained executable (the
// npm package, the wheel and the container image change nothing), there is
// no lookup that a missing, stale or foreign file could defeat, and what
// runs is exactly what was built with the daemon: the memory file is
// written once at first use and sealed against writes, growth and
// shrinking, so nothing — not an upgrade of the files on disk, not another
// process — can change it while the daemon lives, as /proc/self/exe cannot
// change. It costs the daemon's binary the helper's size (about 2.1 MB).

// helperFdFloor is the lowest descriptor number the memory file may take.
// A child's inherited descriptors are placed at 0…n-1 before execve opens
// the helper by its /proc/self/fd path, and Go's fork moves descriptors it
// must not clobber to n…2n+1 while doing so; the helper's descriptor stays
// above both for every run (n is under 20).
const helperFdFloor = 100

// helperBinary is the binary the sandbox's stages run from.
type helperBinary struct {
	path string   // what execve opens: /proc/self/fd/N (N is mem) or /proc/self/exe
	mem  *os.File // the sealed memory file holding the lean helper; nil: this binary
	what string   // what it is, for HelperBinary
}

// helper is chosen once per process, at the first sandboxed start or probe.
var helper = sync.OnceValue(func() helperBinary { return chooseHelper(leaninit.Image()) })

// HelperBinary says which binary the sandbox's init, exec stage and probes
// run from (the daemon logs it at debug). The first call chooses it.
func HelperBinary() string { return helper().what }

// HelperPath is the path that starts the helper binary, for a helper outside
// the sandbox (the watchdog): /proc/self/fd/N of this process, valid for
// execve in a child started from this process (its descriptor is
// close-on-exec, closed only once execve has opened the file), or
// /proc/self/exe. The first call chooses it.
func HelperPath() string { return helper().path }

// chooseHelper loads image into a sealed memory file and checks that it
// starts; with no image, or when that fails, the helper is this binary.
func chooseHelper(image []byte) helperBinary {
	self := helperBinary{path: "/proc/self/exe", what: "this binary, re-executed (no lean init embedded)"}
	if len(image) == 0 {
		return self
	}
	h, err := loadHelper(image)
	if err != nil {
		self.what = fmt.Sprintf("this binary, re-executed (the embedded lean init did not start: %v)", err)
		return self
	}
	return h
}

// loadHelper writes image into a sealed memory file at or above
// helperFdFloor and starts it once as a namespace probe (a new user
// namespace, as the first feature probe) to prove the kernel lets it execute
// (vm.memfd_noexec, an LSM may not).
func loadHelper(image []byte) (helperBinary, error) {
	const name = "coderun-sandbox-init"
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // kernels before 6.3 know no MFD_EXEC; their memory files are executable
		fd, err = unix.MemfdCreate(name, flags)
	}
	if err != nil {
		return helperBinary{}, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if _, err := f.Write(image); err != nil {
		return helperBinary{}, err
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		return helperBinary{}, fmt.Errorf("sealing: %w", err)
	}
	high, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, helperFdFloor)
	if err != nil {
		return helperBinary{}, err
	}
	h := helperBinary{path: "/proc/self/fd/" + strconv.Itoa(high), mem: os.NewFile(uintptr(high), name),
		what: fmt.Sprintf("the embedded lean init (%d bytes, a sealed memory file)", len(image))}
	if err := runProbe(h, []string{probeArgv0}, unix.CLONE_NEWUSER, nil); err != nil {
		h.mem.Close()
		return helperBinary{}, err
	}
	return h, nil
}

// open returns a descriptor of the helper binary for a child to exec
// (/proc/self/fd/<it> there); the caller closes it.
func (h helperBinary) open() (*os.File, error) {
	if h.mem == nil {
		return os.Open(h.path)
	}
	fd, err := unix.FcntlInt(h.mem.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), h.mem.Name()), nil
}
