//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// Config describes the extra containment of tier sandbox (docs/containment.md §2–§3).
type Config struct {
	// ReadOnly are the trees the program may read: the interpreter's
	// installation, standard library, site-packages and the directories of
	// the system libraries it links (see SystemLibraryDirs). Missing
	// entries are skipped.
	ReadOnly []string
	// Executable are read-only trees whose files the program may also
	// execute: the system's installed tools (see SystemExecutableDirs), so
	// a program can run grep, git or sh -c as in tier process. The program
	// binary (Spec.Path) and its dynamic loader are executable wherever
	// they are (execRules); nothing the program can write ever is.
	//
	// The run directory (Spec.Dir) is always read-write; /dev/null,
	// /dev/zero, /dev/full, /dev/urandom, /dev/random, /etc/ld.so.cache
	// and the namespace's own /proc are always readable; the run's own
	// /dev/shm (a tmpfs of MaxFileBytes) is read-write. Nothing else is.
	Executable []string
	// MaxProcs bounds the tasks (processes and threads) of the program and
	// its descendants; MaxFiles is RLIMIT_NOFILE; MaxFileBytes is
	// RLIMIT_FSIZE. All must be positive.
	MaxProcs, MaxFiles int
	MaxFileBytes       int64
	// Session says the program is a persistent session's child, which moves
	// its own soft RLIMIT_CPU before each run: the init's run-wide CPU bound
	// is then the hard limit − 1 (the session's lifetime total) instead of
	// the lowest soft limit seen (docs/containment.md, docs/child-protocol-sessions.md §6.6).
	Session bool
	// Writable are further read-write trees (a session's home, under which
	// its forks' directories are made: session_linux.go).
	Writable []string
	// Listable are folders whose entries the program may list (and those of
	// the folders below them), no file of which it may read unless another
	// rule grants it: the folders of a tree granted in parts around a path
	// the program must not read, so that Python's import system, which lists
	// a package's folder, still finds the parts it may read.
	Listable []string
	// ProxyListener has the init make the egress proxy's listener inside
	// the run's network namespace before the program starts, for the daemon
	// to take (TakeListener): the way in for a daemon that cannot enter the
	// namespace (ListenInNetwork needs root).
	ProxyListener bool
}

// sandboxFlags are the namespaces of every sandboxed run.
const sandboxFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

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

// testNoCgroup makes a root daemon rely on RLIMIT_NPROC alone (tests only:
// it shows that RLIMIT_NPROC does not bound root).
var testNoCgroup bool

// openCgroup creates the run's cgroups when the daemon is root (nil
// otherwise: RLIMIT_NPROC holds): pids, and memory where it can be had.
func openCgroup(maxProcs int) (*runCgroup, error) {
	if os.Geteuid() != 0 || testNoCgroup {
		return nil, nil
	}
	base, err := pidsCgroupBase()
	if err != nil {
		return nil, fmt.Errorf("pids cgroup: %w", err)
	}
	memBase, err := memoryCgroupBase()
	if err != nil {
		memBase = ""
	}
	return newRunCgroup(base, memBase, maxProcs)
}

// withCgroup passes the run's cgroup descriptors to the init: c records
// how many, files gets them after its own.
func withCgroup(c *sandboxConf, files []uintptr, cg *runCgroup) []uintptr {
	if cg == nil {
		return files
	}
	c.cgroups, c.memLimits = len(cg.procs), len(cg.memLimits)
	return append(files, cg.files()...)
}

// SystemLibraryDirs returns the existing standard library directories of
// the system (/lib, /lib64, /usr/lib, /usr/lib64, /usr/local/lib), where
// the dynamic loader finds the libraries an interpreter and its extension
// modules link. Add the interpreter's own trees for Config.ReadOnly.
func SystemLibraryDirs() []string {
	return existingDirs("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
}

// SystemFontDirs returns the existing trees of the system's fonts and their
// configuration (/etc/fonts, /usr/share/fonts, /usr/local/share/fonts,
// /var/cache/fontconfig): public data that plotting libraries and the
// fontconfig tools they run read. Add them to Config.ReadOnly.
func SystemFontDirs() []string {
	return existingDirs("/etc/fonts", "/usr/share/fonts", "/usr/local/share/fonts", "/var/cache/fontconfig")
}

func existingDirs(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// treesScript prints the paths an interpreter reads to run: the binary, the
// standard library, site-packages, libpython's directory, sys.path and, for
// a virtual environment's interpreter, the pyvenv.cfg its start reads (next
// to the executable or one directory up).
const treesScript = `import os, sys, sysconfig
paths = [os.path.realpath(sys.executable)]
paths += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
paths += [sysconfig.get_config_var("LIBDIR") or ""] + sys.path
bindir = os.path.dirname(os.path.abspath(sys.executable))
paths += [os.path.join(d, "pyvenv.cfg") for d in (bindir, os.path.dirname(bindir))]
print("\n".join(p for p in paths if p))`

// InterpreterTrees asks the interpreter at path (a shim that execs one is
// as good) for the files and trees it reads, for Config.ReadOnly: the
// absolute paths it reports that exist, in its order. It takes one start of
// the interpreter (child.Probe, 5 s at most). On error the caller grants the
// binary alone: runs then fail visibly, never with wider access.
func InterpreterTrees(path string) ([]string, error) {
	out, err := child.Probe(path, []string{"-I", "-c", treesScript}, 5*time.Second, 64<<10)
	if err != nil {
		return nil, err
	}
	var trees []string
	for _, line := range strings.Split(string(out), "\n") {
		if p := strings.TrimSpace(line); filepath.IsAbs(p) {
			if _, err := os.Stat(p); err == nil {
				trees = append(trees, p)
			}
		}
	}
	return trees, nil
}

// SystemExecutableDirs returns the existing system trees of installed
// executables (/bin, /sbin, /usr/bin, /usr/sbin, /usr/local/bin,
// /usr/libexec) and SystemLibraryDirs, where helpers such as git's live.
// Only root can write them, and the program never can: Landlock grants it
// no write right there.
func SystemExecutableDirs() []string {
	return append(existingDirs("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/libexec"), SystemLibraryDirs()...)
}

// sandboxRun is what a sandboxed Process keeps for Wait.
type sandboxRun struct {
	pid    int      // the init's
	relay  *os.File // read end of the init's fd 4
	cgroup *runCgroup
}

// Start is child.Start plus tier sandbox: new user (the namespace's root
// is the daemon's uid and gid, one-id mappings), PID, network, mount, IPC and
// UTS namespaces; a minimal init as PID 1 (the helper binary, see
// init_linux.go) that runs the program as its child (never PID 1) in the init's
// process group; for the program, a pids cgroup (root daemon) or
// RLIMIT_NPROC (otherwise), RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_SIGPENDING,
// no_new_privs, a Landlock domain (Config.ReadOnly read-only, spec.Dir
// read-write) and a seccomp filter (no socket(AF_UNIX), no io_uring, no new
// namespaces, whose limits the init also sets to 0: seccomp_linux.go).
//
// Process.Pid is the init's pid: SignalGroup reaches the init (which
// survives anything but SIGKILL) and the program; SIGKILL kills the init,
// and with it the PID namespace and every descendant, setsid() or not.
// Wait returns the program's own wait status and rusage, relayed by the
// init; when the init died first (SIGKILLed), the init's own. With
// sb.Session the Process is the program's instead, which leads its own
// group, and its forks can be adopted (session_linux.go).
//
// spec.Path must be absolute and spec.Dir an existing absolute directory.
// An interpreter that is missing or not executable fails here, like Start.
// A failure inside the namespaces is reported by the init on the program's
// stderr ("coderun sandbox: …") with exit code 125 or 126. The binary must
// call reexec.Dispatch first thing in main (or TestMain) for the init to run.
func Start(spec child.Spec, sb Config) (*child.Process, error) {
	if err := checkSpec(spec, sb); err != nil {
		return nil, err
	}
	c := sandboxConf{rw: append([]string{spec.Dir}, sb.Writable...), ro: sb.ReadOnly, list: sb.Listable, exec: sb.Executable, nproc: sb.MaxProcs, nofile: sb.MaxFiles,
		fsize: sb.MaxFileBytes, session: sb.Session, proxy: sb.ProxyListener, prog: append([]string{spec.Path}, spec.Args...)}
	s, err := spawn.OpenStdio(unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	run, relayW, err := openRun(sb.MaxProcs)
	if err != nil {
		s.CloseChild()
		s.CloseDaemon()
		return nil, err
	}
	files := withCgroup(&c, append(s.ChildFiles(), uintptr(relayW)), run.cgroup)
	pid, err := spawn.ForkExec(helper().path, c.argv(initArgv0), &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   append([]string{}, spec.Env...),
		Files: files,
		Sys:   sandboxSys(sandboxFlags),
	})
	s.CloseChild()
	spawn.CloseFds(relayW)
	run.cgroup.closeFiles()
	if err != nil {
		s.CloseDaemon()
		run.relay.Close()
		run.cgroup.remove()
		return nil, namespaceLimitError(err)
	}
	run.pid = pid
	p := spawn.Started(pid, s.Conn, s.Stdout, s.Stderr)
	if sb.Session {
		return startMembers(p, run)
	}
	spawn.SetReap(p, run.wait)
	return p, nil
}

// namespaceLimitError names the likely cause of ENOSPC from the clone of a
// sandbox's namespaces, which the kernel reports as "no space left on
// device": a namespace limit of the daemon's user (shared with every
// process of that user on the host) is reached.
func namespaceLimitError(err error) error {
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%w (new namespaces refused: a /proc/sys/user/max_*_namespaces limit of the daemon's user is reached)", err)
	}
	return err
}

// openRun opens the relay pipe (returning its raw write end) and creates the
// run's cgroup (when the daemon is root). On error nothing is left open.
func openRun(maxProcs int) (*sandboxRun, int, error) {
	relay, relayW, err := spawn.Pipe("sandbox-relay")
	if err != nil {
		return nil, -1, err
	}
	cg, err := openCgroup(maxProcs)
	if err != nil {
		spawn.CloseFds(relayW)
		relay.Close()
		return nil, -1, err
	}
	return &sandboxRun{relay: relay, cgroup: cg}, relayW, nil
}

func checkSpec(spec child.Spec, sb Config) error {
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

// wait reaps the init and returns the program's Exit (see settle).
func (r *sandboxRun) wait() (child.Exit, error) {
	ws, ru, err := spawn.Wait4(r.pid)
	if err != nil {
		return r.settle(child.Exit{}, err)
	}
	return r.settle(spawn.ExitOf(ws, ru), nil)
}

// settle turns the init's own end (own, or err) into the program's: the
// relayed status when the init relayed one, else own. It releases the relay
// pipe and starts removing the run's cgroup (the namespace is gone by now:
// the init ends only after every other process of its namespace). The
// removal is not waited for: a memory cgroup stays busy while the kernel
// uncharges the run's pages, and the run's result does not depend on it.
func (r *sandboxRun) settle(own child.Exit, err error) (child.Exit, error) {
	defer func() { go r.cgroup.remove() }()
	defer r.relay.Close()
	if err != nil {
		return child.Exit{}, err
	}
	r.relay.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, relaySize)
	if _, rerr := io.ReadFull(r.relay, b); rerr == nil {
		if pws, pru, ok := decodeRelay(b); ok {
			return spawn.ExitOf(pws, pru), nil
		}
	}
	return own, nil
}
