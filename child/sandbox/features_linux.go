//go:build linux

package sandbox

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"golang.org/x/sys/unix"
)

// Feature is one kernel feature tier sandbox needs, as --check reports it.
type Feature struct {
	Name   string // as in Probe's error ("user namespaces", "Landlock" …)
	OK     bool
	Detail string // how it is provided, or why it is not
}

// Probe checks every feature tier sandbox needs. The error names the
// first missing one: "sandbox isolation needs <feature>, which this kernel
// does not provide".
func Probe() error { return Verdict(Features()) }

// Verdict is Probe's error for features as Features reported them.
func Verdict(features []Feature) error {
	for _, f := range features {
		if !f.OK {
			return fmt.Errorf("sandbox isolation needs %s, which this kernel does not provide", f.Name)
		}
	}
	return nil
}

// Features probes each feature tier sandbox needs (a few short-lived
// starts of the helper binary, tens of milliseconds in all) and reports it,
// in a fixed order. The probes are independent and run side by side; the
// last entry starts a complete sandbox (init, mounts, hostname, limits,
// no_new_privs, Landlock) without a program, and only once every other
// feature is found present.
func Features() []Feature {
	ns := []struct {
		name string
		flag uintptr
	}{
		{"user namespaces", unix.CLONE_NEWUSER},
		{"PID namespaces", unix.CLONE_NEWPID},
		{"network namespaces", unix.CLONE_NEWNET},
		{"mount namespaces", unix.CLONE_NEWNS},
		{"IPC namespaces", unix.CLONE_NEWIPC},
		{"UTS namespaces", unix.CLONE_NEWUTS},
	}
	var probes []func() Feature
	for _, n := range ns {
		probes = append(probes, func() Feature { return nsFeature(n.name, unix.CLONE_NEWUSER|n.flag) })
	}
	probes = append(probes, nnpFeature, landlockFeature, seccompFeature, procBoundFeature, memoryFeature, rlimitFeature)
	fs := make([]Feature, len(probes))
	var wg sync.WaitGroup
	for i, probe := range probes {
		wg.Go(func() { fs[i] = probe() })
	}
	wg.Wait()
	all := true
	for _, f := range fs {
		all = all && f.OK
	}
	f := Feature{Name: "a working sandbox init (private /proc, hostname, limits, no_new_privs, Landlock, seccomp)"}
	if !all {
		f.Detail = "not attempted: a feature above is missing"
	} else if err := probeInit(); err != nil {
		f.Detail = err.Error()
	} else {
		f.OK, f.Detail = true, "a run-less sandbox started and exited 0"
	}
	return append(fs, f)
}

// runProbe starts the helper binary h with argv and flags and returns how
// it ended (within 10 s) and up to 1 KiB of its stderr.
func runProbe(h helperBinary, argv []string, flags uintptr, files []uintptr) error {
	errR, errW, err := spawn.Pipe("sandbox-probe-stderr")
	if err != nil {
		return err
	}
	defer errR.Close()
	devNull, err := spawn.OpenDevNull()
	if err != nil {
		unix.Close(errW)
		return err
	}
	fds := append([]uintptr{uintptr(devNull), uintptr(devNull), uintptr(errW)}, files...)
	pid, err := spawn.ForkExec(h.path, argv, &syscall.ProcAttr{Files: fds, Sys: sandboxSys(flags)})
	spawn.CloseFds(devNull, errW)
	if err != nil {
		return namespaceLimitError(err)
	}
	p := spawn.Started(pid, nil, nil, nil)
	out := make(chan []byte, 1)
	go func() { out <- spawn.ReadBounded(errR, 1024) }()
	exited := spawn.ReapAsync(pid)
	select {
	case w := <-exited:
		errR.SetReadDeadline(time.Now().Add(time.Second))
		return spawn.ExitError(w, <-out)
	case <-time.After(10 * time.Second):
		p.SignalGroup(syscall.SIGKILL)
		errR.Close()
		<-exited
		return fmt.Errorf("%w (10s)", spawn.ErrDeadline)
	}
}

func nsFeature(name string, flags uintptr) Feature {
	if err := runProbe(helper(), []string{probeArgv0}, flags, nil); err != nil {
		return Feature{Name: name, Detail: err.Error()}
	}
	return Feature{Name: name, OK: true, Detail: "unprivileged clone with a one-uid mapping works"}
}

func nnpFeature() Feature {
	f := Feature{Name: "no_new_privs"}
	if _, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil {
		f.Detail = err.Error()
		return f
	}
	f.OK, f.Detail = true, "prctl(PR_SET_NO_NEW_PRIVS)"
	return f
}

func landlockFeature() Feature {
	f := Feature{Name: "Landlock"}
	abi, err := landlockABI()
	if err != nil {
		f.Detail = err.Error()
		return f
	}
	f.OK, f.Detail = true, fmt.Sprintf("ABI %d", abi)
	if abi < 4 {
		f.Detail += " (no TCP rules; the empty network namespace still applies)"
	}
	return f
}

func procBoundFeature() Feature {
	f := Feature{Name: "a per-run process bound (RLIMIT_NPROC for a non-root daemon, a writable pids cgroup for a root one)"}
	if os.Geteuid() != 0 {
		f.OK, f.Detail = true, "RLIMIT_NPROC, counted per run (each run has its own user namespace)"
		return f
	}
	base, err := pidsCgroupBase()
	if err != nil {
		f.Detail = "running as root, where RLIMIT_NPROC does not apply, and no pids cgroup: " + err.Error()
		return f
	}
	f.OK, f.Detail = true, "pids cgroup under "+base+" (running as root, where RLIMIT_NPROC does not apply)"
	return f
}

// memoryFeature reports the optional memory cgroup (always OK: without it,
// memfd and SysV shared memory are refused and /dev/shm is bounded anyway).
func memoryFeature() Feature {
	f := Feature{Name: "a per-run memory bound beyond RLIMIT_AS (a memory cgroup for a root daemon, where one can be had)", OK: true}
	if os.Geteuid() != 0 {
		f.Detail = "none (not root): memfd and SysV shared memory refused, /dev/shm bounded"
		return f
	}
	base, err := memoryCgroupBase()
	if err != nil {
		f.Detail = "none (" + err.Error() + "): memfd and SysV shared memory refused, /dev/shm bounded"
		return f
	}
	f.Detail = "memory cgroup under " + base + ", limited to the run's address-space budget"
	return f
}

func rlimitFeature() Feature {
	f := Feature{Name: "RLIMIT_NOFILE and RLIMIT_FSIZE"}
	var rl unix.Rlimit
	for _, r := range []int{unix.RLIMIT_NOFILE, unix.RLIMIT_FSIZE} {
		if err := unix.Getrlimit(r, &rl); err != nil {
			f.Detail = err.Error()
			return f
		}
	}
	f.OK, f.Detail = true, "setrlimit before exec"
	return f
}

// probeInit starts a complete sandbox whose exec stage exits 0 instead of
// running a program.
func probeInit() (err error) {
	// A run directory like any other: registered with the watchdog and
	// named after its owner, so neither a crash nor the start-up sweep
	// leaves it behind.
	dir, err := rundir.Create(os.TempDir())
	if err != nil {
		return err
	}
	defer rundir.Remove(dir)
	c := sandboxConf{rw: []string{dir}, nproc: 16, nofile: 64, fsize: 1 << 20, probe: true}
	relayR, relayW, err := spawn.Pipe("sandbox-probe-relay")
	if err != nil {
		return err
	}
	defer relayR.Close()
	devNull, err := spawn.OpenDevNull()
	if err != nil {
		unix.Close(relayW)
		return err
	}
	defer unix.Close(devNull)
	files := []uintptr{uintptr(devNull), uintptr(relayW)} // fd 3 /dev/null, fd 4 relay
	cg, err := openCgroup(c.nproc)
	if err != nil {
		unix.Close(relayW)
		return err
	}
	defer cg.remove()
	err = runProbe(helper(), c.argv(initArgv0), sandboxFlags, withCgroup(&c, files, cg))
	unix.Close(relayW)
	cg.closeFiles()
	if err != nil {
		return err
	}
	relayR.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, relaySize)
	if _, err := io.ReadFull(relayR, b); err != nil {
		return fmt.Errorf("no status relayed by the init: %w", err)
	}
	ws, _, ok := decodeRelay(b)
	if !ok || ws.ExitStatus() != 0 || ws.Signaled() {
		return fmt.Errorf("the sandbox's exec stage failed (wait status %#x)", uint32(ws))
	}
	return nil
}
