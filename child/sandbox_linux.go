//go:build linux

package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox describes the extra containment of tier sandbox (SPEC.md §8).
type Sandbox struct {
	// ReadOnly are the trees the program may read: the interpreter's
	// installation, standard library, site-packages and the directories of
	// the system libraries it links (see SystemLibraryDirs). Missing
	// entries are skipped. Only the program binary (Spec.Path) and its
	// dynamic loader may be executed (execRules), nothing else in these
	// trees or writable. The run directory (Spec.Dir) is always
	// read-write; /dev/null, /dev/zero, /dev/full, /dev/urandom,
	// /dev/random, /etc/ld.so.cache and the namespace's own /proc are
	// always readable; the run's own /dev/shm (a tmpfs of MaxFileBytes)
	// is read-write. Nothing else is.
	ReadOnly []string
	// MaxProcs bounds the tasks (processes and threads) of the program and
	// its descendants; MaxFiles is RLIMIT_NOFILE; MaxFileBytes is
	// RLIMIT_FSIZE. All must be positive.
	MaxProcs, MaxFiles int
	MaxFileBytes       int64
}

// Feature is one kernel feature tier sandbox needs, as --check reports it.
type Feature struct {
	Name   string // as in ProbeSandbox's error ("user namespaces", "Landlock" …)
	OK     bool
	Detail string // how it is provided, or why it is not
}

// sandboxFlags are the namespaces of every sandboxed run.
const sandboxFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// ProbeSandbox checks every feature tier sandbox needs. The error names the
// first missing one: "sandbox isolation needs <feature>, which this kernel
// does not provide".
func ProbeSandbox() error {
	for _, f := range SandboxFeatures() {
		if !f.OK {
			return fmt.Errorf("sandbox isolation needs %s, which this kernel does not provide", f.Name)
		}
	}
	return nil
}

// SandboxFeatures probes each feature tier sandbox needs (a few short-lived
// re-executions of this binary, tens of milliseconds in all) and reports it.
// The last entry starts a complete sandbox (init, mounts, hostname, limits,
// no_new_privs, Landlock) without a program; it is only attempted when the
// others are present.
func SandboxFeatures() []Feature {
	var fs []Feature
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
	for _, n := range ns {
		fs = append(fs, nsFeature(n.name, unix.CLONE_NEWUSER|n.flag))
	}
	fs = append(fs, nnpFeature(), landlockFeature(), seccompFeature(), procBoundFeature(), rlimitFeature())
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

func sandboxSys(flags uintptr) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setsid:                     true,
		Pdeathsig:                  syscall.SIGKILL,
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}

// runProbe starts this binary with argv and flags and returns how it ended
// (within 10 s) and up to 1 KiB of its stderr.
func runProbe(argv []string, flags uintptr, files []uintptr) error {
	errR, errW, err := pipe("sandbox-probe-stderr")
	if err != nil {
		return err
	}
	defer errR.Close()
	devNull, err := openDevNull()
	if err != nil {
		unix.Close(errW)
		return err
	}
	fds := append([]uintptr{uintptr(devNull), uintptr(devNull), uintptr(errW)}, files...)
	pid, err := forkExec("/proc/self/exe", argv, &syscall.ProcAttr{Files: fds, Sys: sandboxSys(flags)})
	closeFds(devNull, errW)
	if err != nil {
		return err
	}
	p := &Process{Pid: pid}
	p.startTime, p.hasStart = StartTime(pid)
	out := make(chan []byte, 1)
	go func() { out <- readBounded(errR, 1024) }()
	exited := make(chan waitResult, 1)
	go func() { ws, _, err := wait4(pid); exited <- waitResult{ws, err} }()
	select {
	case w := <-exited:
		errR.SetReadDeadline(time.Now().Add(time.Second))
		return probeError(&w, <-out)
	case <-time.After(10 * time.Second):
		p.SignalGroup(syscall.SIGKILL)
		errR.Close()
		<-exited
		return fmt.Errorf("%w (10s)", ErrDeadline)
	}
}

func nsFeature(name string, flags uintptr) Feature {
	if err := runProbe([]string{probeArgv0}, flags, nil); err != nil {
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
	dir, err := os.MkdirTemp("", "coderun-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := sandboxConf{rw: []string{dir}, nproc: 16, nofile: 64, fsize: 1 << 20, probe: true}
	relayR, relayW, err := pipe("sandbox-probe-relay")
	if err != nil {
		return err
	}
	defer relayR.Close()
	devNull, err := openDevNull()
	if err != nil {
		unix.Close(relayW)
		return err
	}
	defer unix.Close(devNull)
	files := []uintptr{uintptr(devNull), uintptr(relayW)} // fd 3 /dev/null, fd 4 relay
	cg, err := runCgroup(c.nproc)
	if err != nil {
		unix.Close(relayW)
		return err
	}
	defer cg.remove()
	if cg != nil {
		c.cgroup = true
		files = append(files, cg.procs.Fd())
	}
	err = runProbe(c.argv(initArgv0), sandboxFlags, files)
	unix.Close(relayW)
	if cg != nil {
		cg.procs.Close()
	}
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

// testNoCgroup makes a root daemon rely on RLIMIT_NPROC alone (tests only:
// it shows that RLIMIT_NPROC does not bound root).
var testNoCgroup bool

// runCgroup creates the run's pids cgroup when the daemon is root (nil
// otherwise: RLIMIT_NPROC holds).
func runCgroup(maxProcs int) (*pidsCgroup, error) {
	if os.Geteuid() != 0 || testNoCgroup {
		return nil, nil
	}
	base, err := pidsCgroupBase()
	if err != nil {
		return nil, fmt.Errorf("pids cgroup: %w", err)
	}
	return newPidsCgroup(base, maxProcs)
}

// SystemLibraryDirs returns the existing standard library directories of
// the system (/lib, /lib64, /usr/lib, /usr/lib64, /usr/local/lib), where
// the dynamic loader finds the libraries an interpreter and its extension
// modules link. Add the interpreter's own trees for Sandbox.ReadOnly.
func SystemLibraryDirs() []string {
	var out []string
	for _, d := range []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// sandboxRun is what a sandboxed Process keeps for Wait.
type sandboxRun struct {
	relay  *os.File // read end of the init's fd 4
	cgroup *pidsCgroup
}

// StartSandboxed is Start plus tier sandbox: new user (the namespace's root
// is the daemon's uid and gid, one-id mappings), PID, network, mount, IPC and
// UTS namespaces; a minimal init as PID 1 (this binary re-executed, see
// sandbox_init_linux.go) that runs the program as its child (never PID 1) in the init's
// process group; for the program, a pids cgroup (root daemon) or
// RLIMIT_NPROC (otherwise), RLIMIT_NOFILE, RLIMIT_FSIZE, no_new_privs, a
// Landlock domain (Sandbox.ReadOnly read-only, spec.Dir read-write) and a
// seccomp filter (no socket(AF_UNIX), no io_uring).
//
// Process.Pid is the init's pid: SignalGroup reaches the init (which
// survives anything but SIGKILL) and the program; SIGKILL kills the init,
// and with it the PID namespace and every descendant, setsid() or not.
// Wait returns the program's own wait status and rusage, relayed by the
// init; when the init died first (SIGKILLed), the init's own.
//
// spec.Path must be absolute and spec.Dir an existing absolute directory.
// An interpreter that is missing or not executable fails here, like Start.
// A failure inside the namespaces is reported by the init on the program's
// stderr ("coderun sandbox: …") with exit code 125 or 126.
func StartSandboxed(spec Spec, sb Sandbox) (*Process, error) {
	if err := checkSandboxSpec(spec, sb); err != nil {
		return nil, err
	}
	c := sandboxConf{rw: []string{spec.Dir}, ro: sb.ReadOnly, nproc: sb.MaxProcs, nofile: sb.MaxFiles,
		fsize: sb.MaxFileBytes, prog: append([]string{spec.Path}, spec.Args...)}
	s, err := openStdio()
	if err != nil {
		return nil, err
	}
	relay, relayW, err := pipe("sandbox-relay")
	if err != nil {
		s.closeChild()
		s.closeDaemon()
		return nil, err
	}
	cg, err := runCgroup(sb.MaxProcs)
	if err != nil {
		s.closeChild()
		s.closeDaemon()
		closeFds(relayW)
		relay.Close()
		return nil, err
	}
	files := append(s.childFiles(), uintptr(relayW))
	if cg != nil {
		c.cgroup = true
		files = append(files, cg.procs.Fd())
	}
	pid, err := forkExec("/proc/self/exe", c.argv(initArgv0), &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   append([]string{}, spec.Env...),
		Files: files,
		Sys:   sandboxSys(sandboxFlags),
	})
	s.closeChild()
	closeFds(relayW)
	if cg != nil {
		cg.procs.Close()
	}
	if err != nil {
		s.closeDaemon()
		relay.Close()
		cg.remove()
		return nil, err
	}
	p := &Process{Pid: pid, Conn: s.conn, Stdout: s.stdout, Stderr: s.stderr,
		sandbox: &sandboxRun{relay: relay, cgroup: cg}}
	p.startTime, p.hasStart = StartTime(pid)
	return p, nil
}

func checkSandboxSpec(spec Spec, sb Sandbox) error {
	for _, a := range append([]string{spec.Path}, spec.Args...) {
		if strings.IndexByte(a, 0) >= 0 {
			return &os.PathError{Op: "fork/exec", Path: spec.Path, Err: unix.EINVAL}
		}
	}
	if !filepath.IsAbs(spec.Path) {
		return &os.PathError{Op: "fork/exec", Path: spec.Path, Err: errors.New("sandbox needs an absolute program path")}
	}
	if st, err := os.Stat(spec.Path); err != nil {
		return &os.PathError{Op: "fork/exec", Path: spec.Path, Err: errors.Unwrap(err)}
	} else if !st.Mode().IsRegular() {
		return &os.PathError{Op: "fork/exec", Path: spec.Path, Err: unix.EACCES}
	}
	if err := unix.Access(spec.Path, unix.X_OK); err != nil {
		return &os.PathError{Op: "fork/exec", Path: spec.Path, Err: err}
	}
	if !filepath.IsAbs(spec.Dir) {
		return fmt.Errorf("child: sandbox needs an absolute run directory, got %q", spec.Dir)
	}
	if st, err := os.Stat(spec.Dir); err != nil {
		return &os.PathError{Op: "chdir", Path: spec.Dir, Err: errors.Unwrap(err)}
	} else if !st.IsDir() {
		return &os.PathError{Op: "chdir", Path: spec.Dir, Err: unix.ENOTDIR}
	}
	if sb.MaxProcs <= 0 || sb.MaxFiles <= 0 || sb.MaxFileBytes <= 0 {
		return fmt.Errorf("child: sandbox limits must be positive (procs %d, files %d, file bytes %d)",
			sb.MaxProcs, sb.MaxFiles, sb.MaxFileBytes)
	}
	return nil
}

// exit turns the init's wait result into the program's Exit: the relayed
// status when the init relayed one, else the init's own. It releases the
// relay pipe and the run's cgroup (the namespace is gone by now: the init is
// reaped only after every other process of its namespace).
func (r *sandboxRun) exit(ws unix.WaitStatus, ru unix.Rusage, err error) (Exit, error) {
	defer r.cgroup.remove()
	defer r.relay.Close()
	if err != nil {
		return Exit{}, err
	}
	r.relay.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, relaySize)
	if _, rerr := io.ReadFull(r.relay, b); rerr == nil {
		if pws, pru, ok := decodeRelay(b); ok {
			return exitOf(pws, pru), nil
		}
	}
	return exitOf(ws, ru), nil
}
