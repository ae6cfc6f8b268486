//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// The sandbox init and the program's pre-exec stage run inside a binary
// that imports this package (the lean helper, else the daemon or a test
// binary: helperbin_linux.go): Start executes it with a marker argv[0], and
// HelperMain, called first thing in its main (or TestMain), takes over.
//
//	daemon ──clone(NEWUSER|NEWPID|NEWNET|NEWNS|NEWIPC|NEWUTS)──► init (PID 1)
//	   fds 0-3 stdio, 4 relay pipe, 5… cgroups       private mounts, new /proc
//	                                                  (host files masked),
//	                                                  private /dev/shm, hostname,
//	                                                  no further namespaces,
//	                                                  all signals caught
//	         init ──fork/exec──► stage "exec" ──execve──► program
//	                 confine: no_new_privs, Landlock, seccomp, then the pids
//	                 cgroup and RLIMIT_NPROC/NOFILE/FSIZE
//	   init: wait4(-1) until the program is reaped, meanwhile summing the
//	   run's CPU against the program's RLIMIT_CPU (cpu_linux.go); then kill
//	   and reap the rest, write the program's wait status and the run's
//	   rusage on fd 4 and exit — the PID namespace dies with it.

const (
	initArgv0     = "coderun-sandbox-init"
	execArgv0     = "coderun-sandbox-exec"
	probeArgv0    = "coderun-sandbox-probe"
	forkInitArgv0 = "coderun-sandbox-forkinit" // forkinit_linux.go

	sandboxHostname = "coderun"

	initFailed = 125 // exit code of an init that could not start the program
	execFailed = 126 // exit code of a stage that could not exec the program

	relayFd      = 4 // in the init: write end of the relay pipe
	cgroupFd     = 5 // in the init: the first cgroup.procs, then the others and the memory limits
	execCgroupFd = 4 // the first cgroup.procs, in the exec stage
)

// HelperMain runs the stage argv[0] names (the init, the exec stage, or a
// namespace probe, which exits 0 at once) and does not return; it returns at
// once when argv names none of them. reexec.Dispatch calls it.
func HelperMain(argv []string) {
	if len(argv) == 0 {
		return
	}
	switch argv[0] {
	case probeArgv0:
		unix.Exit(0)
	case initArgv0:
		sandboxInit(argv[1:])
	case execArgv0:
		sandboxExec(argv[1:])
	case forkInitArgv0:
		sandboxForkInit(argv[1:])
	}
}

// sandboxConf is what the daemon tells the init, as argv
// ("key=value"… "--" program argv…).
type sandboxConf struct {
	rw, ro, exec  []string
	list          []string // Config.Listable
	nproc, nofile int
	fsize         int64
	cgroups       int // cgroup.procs descriptors (root daemon: pids, and memory in v1)
	memLimits     int // memory limit descriptors after them (memory cgroup)
	probe         bool
	session       bool     // the program is a session's child (cpu_linux.go)
	proxy         bool     // the init makes the proxy's listener (Config.ProxyListener)
	forked        int      // the program, already forked (forkinit_linux.go): its pid
	prog          []string // path, args; empty in probe mode
	// nsRoot prefixes the paths of the namespace's own mounts (/proc,
	// /dev/shm) in the rules: empty inside the namespace (the init, the
	// exec stage), /proc/<member>/root for a ruleset the daemon builds
	// (ForkRuleset). Never passed on the command line.
	nsRoot string
}

func (c sandboxConf) argv(argv0 string) []string {
	a := []string{argv0,
		"nproc=" + strconv.Itoa(c.nproc), "nofile=" + strconv.Itoa(c.nofile),
		"fsize=" + strconv.FormatInt(c.fsize, 10)}
	for _, p := range c.rw {
		a = append(a, "rw="+p)
	}
	for _, p := range c.ro {
		a = append(a, "ro="+p)
	}
	for _, p := range c.exec {
		a = append(a, "exec="+p)
	}
	for _, p := range c.list {
		a = append(a, "list="+p)
	}
	if c.cgroups > 0 {
		a = append(a, "cgroups="+strconv.Itoa(c.cgroups), "memlimits="+strconv.Itoa(c.memLimits))
	}
	if c.probe {
		a = append(a, "probe=1")
	}
	if c.session {
		a = append(a, "session=1")
	}
	if c.proxy {
		a = append(a, "proxy=1")
	}
	return append(append(a, "--"), c.prog...)
}

func parseSandboxConf(args []string) (sandboxConf, error) {
	var c sandboxConf
	for i, a := range args {
		if a == "--" {
			c.prog = args[i+1:]
			if len(c.prog) == 0 && !c.probe {
				return c, errors.New("no program")
			}
			return c, nil
		}
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "rw":
			c.rw = append(c.rw, v)
		case "ro":
			c.ro = append(c.ro, v)
		case "exec":
			c.exec = append(c.exec, v)
		case "list":
			c.list = append(c.list, v)
		case "nproc":
			c.nproc, err = strconv.Atoi(v)
		case "nofile":
			c.nofile, err = strconv.Atoi(v)
		case "fsize":
			c.fsize, err = strconv.ParseInt(v, 10, 64)
		case "cgroups":
			c.cgroups, err = strconv.Atoi(v)
		case "memlimits":
			c.memLimits, err = strconv.Atoi(v)
		case "probe":
			c.probe = v == "1"
		case "session":
			c.session = v == "1"
		case "proxy":
			c.proxy = v == "1"
		case "prog":
			c.forked, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown setting %q", a)
		}
		if err != nil {
			return c, err
		}
	}
	return c, errors.New("missing --")
}

func stageFail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "coderun sandbox: "+format+"\n", a...)
	unix.Exit(code)
}

// sandboxInit is PID 1 of the run's namespaces. It never returns.
func sandboxInit(args []string) {
	c, err := parseSandboxConf(args)
	if err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	// Every signal has a handler, so nothing but SIGKILL from the daemon
	// (the group kill) ends the init early: a group SIGTERM reaches the
	// program, which is in the same process group, and the init outlives it
	// to relay its status. Handlers, unlike SIG_IGN, are not inherited
	// across exec.
	signal.Notify(make(chan os.Signal, 1))
	unix.CloseRange(relayFd, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)

	if err := prepareNamespace(c); err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	devNull, err := spawn.OpenDevNull()
	if err != nil {
		stageFail(initFailed, "init: %v", err)
	}
	files := []uintptr{0, 1, 2, 3}
	for i := range c.cgroups {
		files = append(files, uintptr(cgroupFd+i))
	}
	// Same process group as the init (the daemon's group signals reach the
	// program); parent-death SIGKILL for symmetry with tier process.
	pid, err := syscall.ForkExec("/proc/self/exe", c.argv(execArgv0), &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		stageFail(initFailed, "init: starting the program: %v", err)
	}
	go watchRun(pid, memLimitFds(c), c.session)
	// The init holds none of the program's descriptors from now on (only
	// the memory limits, which watchRun writes).
	for fd := 0; fd <= 2; fd++ {
		unix.Dup2(devNull, fd)
	}
	unix.Close(3)
	for i := range c.cgroups { // without a cgroup, fd 5 may be the runtime's own
		unix.Close(cgroupFd + i)
	}
	if c.session {
		relayMembers()
	}
	relayProgram(pid)
}

// relayMembers is the init of a session's namespace (session_linux.go):
// the program and the forks of it that the init takes in (born its
// children, or orphaned to it) outlive one another, so it relays the end of
// every child it reaps, each with its own pid and rusage, and exits once it
// has no child left. The daemon keeps the records of its members and ends
// the namespace (SIGKILL of the init) when the last of them is gone.
func relayMembers() {
	for {
		wpid, ws, ru := reapNext(0) // none left: done
		bound := cpuAtKill.Load() != 0 && ws.Signaled() && ws.Signal() == unix.SIGKILL
		unix.Write(relayFd, encodeMember(wpid, bound, ws, ru))
	}
}

// reapNext reaps any child of the init, again while interrupted; when it
// cannot (ECHILD: no child left), the init exits with code.
func reapNext(code int) (int, unix.WaitStatus, unix.Rusage) {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		wpid, err := unix.Wait4(-1, &ws, unix.WALL, &ru)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Exit(code)
		}
		return wpid, ws, ru
	}
}

// relayProgram reaps the init's children until the program (pid) is among
// them, then kills and reaps the rest, relays the program's wait status
// with the run's rusage, and exits.
func relayProgram(pid int) {
	for {
		if wpid, ws, ru := reapNext(initFailed); wpid == pid {
			// Kill the rest now rather than when the namespace is torn
			// down: exit_group releases the init's other threads first,
			// and their RLIMIT_NPROC slots would otherwise let a fork bomb
			// grow past its bound for that moment. Reaping them all makes
			// the init's children rusage the CPU of the whole run.
			unix.Kill(-1, unix.SIGKILL)
			reapAll()
			unix.Write(relayFd, encodeRelay(ws, runRusage(ru)))
			unix.Exit(0)
		}
	}
}

// prepareNamespace sets up the run's namespaces from inside (the init is
// their root): private mounts, this PID namespace's /proc with host
// information masked, no namespace limit above 0, a private bounded
// /dev/shm, the hostname.
func prepareNamespace(c sandboxConf) error {
	// Mounts stay in this namespace; /proc shows this PID namespace only.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := maskProc(); err != nil {
		return err
	}
	if err := forbidNamespaces(); err != nil {
		return err
	}
	// A private, bounded /dev/shm (POSIX semaphores and shared memory, as
	// multiprocessing uses them), nothing of the host's.
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		opts := fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", c.fsize, 4*c.nofile)
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting /dev/shm: %w", err)
		}
	}
	if err := unix.Sethostname([]byte(sandboxHostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if c.proxy {
		listenForDaemon()
	}
	return nil
}

// maskedProc are the /proc entries everyone may read that describe the host
// rather than the run: the daemon user's keyrings and their quotas, the
// kernel's configuration, the host's scheduler state (with host pids and
// command names), and the host-wide counts of open files, inodes, dentries
// and AIO contexts, which follow what other runs do; and /proc/tty/driver,
// a root-only directory below the top level (serial lines' counters).
var maskedProc = []string{"/proc/keys", "/proc/key-users", "/proc/config.gz", "/proc/sched_debug",
	"/proc/sys/fs/file-nr", "/proc/sys/fs/inode-nr", "/proc/sys/fs/inode-state", "/proc/sys/fs/dentry-state",
	"/proc/sys/fs/aio-nr", "/proc/tty/driver"}

// maskProc masks, in the run's new /proc, every top-level entry that is not
// world-readable (rootOnlyProc) and each of maskedProc this kernel has: the
// program reads nothing there. Landlock forbids the program to unmount them.
func maskProc() error {
	rootOnly, err := rootOnlyProc()
	if err != nil {
		return err
	}
	for _, p := range append(rootOnly, maskedProc...) {
		if err := maskProcEntry(p); err != nil {
			return fmt.Errorf("masking %s: %w", p, err)
		}
	}
	return nil
}

// rootOnlyProc lists the top-level /proc entries, pid directories and links
// aside, that others may not read. Their owner is root, and so is the
// program of a root daemon (its namespace's root maps to it), which would
// read them by the owner's bits: the host's physical pages and the memory
// cgroup of each (kpageflags, kpagecount, kpagecgroup: another run's memory
// use, page by page), the kernel's slabs and allocations (slabinfo,
// pagetypeinfo, vmallocinfo), its timers (timer_list), and whatever a
// future kernel adds with that mode.
func rootOnlyProc() ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	var out []string
	for _, e := range entries {
		if _, pid := strconv.Atoi(e.Name()); pid == nil || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().Perm()&0o004 == 0 {
			out = append(out, "/proc/"+e.Name())
		}
	}
	return out, nil
}

// maskProcEntry hides p, when this kernel has it: /dev/null bound over a
// file, an empty read-only tmpfs over a directory.
func maskProcEntry(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return nil
	}
	if st.IsDir() {
		return unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=0500")
	}
	return unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
}

// forbidNamespaces sets every namespace limit of the run's user namespace
// to 0: no process of the run can make a namespace of any type, whatever
// system call it uses (the seccomp filter refuses the usual ones first).
// The kernel counts a new namespace against the limits of its creator's
// user namespace and of every ancestor, up to the host's for the daemon's
// user, which one run could otherwise exhaust for every other run and
// process of that user. /proc/sys/user shows the limits of the reader's
// user namespace, this run's; they bind it and its descendants. The init,
// root there with CAP_SYS_RESOURCE, may write them; the program, root there
// too, may not: Landlock grants it /proc for reading only.
func forbidNamespaces() error {
	const dir = "/proc/sys/user/"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("namespace limits: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "max_") && strings.HasSuffix(n, "_namespaces") {
			if err := os.WriteFile(dir+n, []byte("0"), 0); err != nil {
				return fmt.Errorf("namespace limits: %w", err)
			}
		}
	}
	return nil
}

// memLimitFds are the init's descriptors of the run's memory limit files.
func memLimitFds(c sandboxConf) []int {
	var fds []int
	for i := range c.memLimits {
		fds = append(fds, cgroupFd+c.cgroups+i)
	}
	return fds
}

// reapAll reaps the init's children until it has none.
func reapAll() {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err != nil && err != unix.EINTR {
			return
		}
	}
}

// sandboxExec is the program's process before execve: it confines itself and execs the program. It never
// returns.
func sandboxExec(args []string) {
	// no_new_privs and the Landlock domain are per thread: set them on the
	// thread that calls execve.
	runtime.LockOSThread()
	c, err := parseSandboxConf(args)
	if err != nil {
		stageFail(execFailed, "%v", err)
	}
	// A session's interpreter leads its own process group: its group kill
	// must spare the init, which outlives it while forks of it live.
	if c.session {
		if err := unix.Setpgid(0, 0); err != nil {
			stageFail(execFailed, "setpgid: %v", err)
		}
	}
	if err := confine(c, execCgroupFd); err != nil {
		stageFail(execFailed, "%v", err)
	}
	if c.probe {
		unix.Exit(0)
	}
	err = syscall.Exec(c.prog[0], c.prog, os.Environ())
	stageFail(execFailed, "exec %s: %v", c.prog[0], err)
}

// confine applies to the calling process, which execs the program next,
// every rule of the sandbox that is not a namespace: no_new_privs, the
// Landlock domain, the seccomp filter, then the process bound (joining the
// run's cgroups through c.cgroups descriptors from procs on) and the rlimits. The caller is
// locked to its OS thread (no_new_privs and Landlock are per thread). It is
// the one place these rules are applied, for the program's first process
// and for any future start path (a sandboxed fork server's children).
func confine(c sandboxConf, procs int) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := landlockRestrict(sandboxRules(c)); err != nil {
		return err
	}
	if err := seccompInstall(); err != nil {
		return err
	}
	// The process bound last, right before execve, so this stage's own
	// runtime threads never run into it.
	if err := joinCgroups(c, procs, 0); err != nil {
		return err
	}
	return setSandboxLimits(c, 0)
}

// joinCgroups moves pid (0: the calling process) into the run's cgroups
// through c.cgroups cgroup.procs descriptors from procs on, and closes them.
func joinCgroups(c sandboxConf, procs, pid int) error {
	for fd := procs; fd < procs+c.cgroups; fd++ {
		if _, err := unix.Write(fd, []byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("joining the run's cgroup: %w", err)
		}
		unix.Close(fd)
	}
	return nil
}

// sandboxSigPending bounds a run's queued signals (RLIMIT_SIGPENDING).
const sandboxSigPending = 256

// setSandboxLimits sets NOFILE, FSIZE, SIGPENDING and NPROC (soft = hard; the program
// cannot raise a hard limit without CAP_SYS_RESOURCE in the initial user
// namespace) of pid (0: the calling process). Queued signals are counted
// per user at every ancestor user namespace, up to the daemon user's count
// on the host, shared with all its processes (for root, tens of thousands
// for every root process): a run may hold sandboxSigPending of them. NPROC counts every task of the
// namespace's uid, the init's threads included, so the tasks present now
// other than pid's are added: after execve the program may hold c.nproc
// tasks. Every task of the run's user namespace is in its PID namespace,
// where the init counts them (a forked run's first process is made in both
// at once, so none is outside).
func setSandboxLimits(c sandboxConf, pid int) error {
	set := func(name string, res int, v uint64) error {
		// syscall.Setrlimit for this process: it also keeps the Go runtime
		// from restoring its start-up RLIMIT_NOFILE at execve.
		var err error
		if pid == 0 {
			err = syscall.Setrlimit(res, &syscall.Rlimit{Cur: v, Max: v})
		} else {
			err = unix.Prlimit(pid, res, &unix.Rlimit{Cur: v, Max: v}, nil)
		}
		if err != nil {
			return fmt.Errorf("setrlimit %s %d: %w", name, v, err)
		}
		return nil
	}
	if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(c.nofile)); err != nil {
		return err
	}
	if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(c.fsize)); err != nil {
		return err
	}
	if err := set("RLIMIT_SIGPENDING", unix.RLIMIT_SIGPENDING, sigPendingBound(pid)); err != nil {
		return err
	}
	self := "/proc/self"
	if pid != 0 {
		self = "/proc/" + strconv.Itoa(pid)
	}
	others := countTasks("/proc") - countTasks(self)
	return set("RLIMIT_NPROC", unix.RLIMIT_NPROC, uint64(c.nproc+max(others, 0)))
}

// sigPendingBound is sandboxSigPending, or pid's hard RLIMIT_SIGPENDING
// where that is lower (only CAP_SYS_RESOURCE could raise it).
func sigPendingBound(pid int) uint64 {
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_SIGPENDING, nil, &cur); err == nil && cur.Max < sandboxSigPending {
		return cur.Max
	}
	return sandboxSigPending
}

// countTasks counts the threads of the processes under dir ("/proc": all of
// this PID namespace; "/proc/<pid>" or "/proc/self": that process).
func countTasks(dir string) int {
	if dir != "/proc" {
		e, _ := os.ReadDir(dir + "/task")
		return len(e)
	}
	n := 0
	procs, _ := os.ReadDir(dir)
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err == nil {
			e, _ := os.ReadDir(dir + "/" + p.Name() + "/task")
			n += len(e)
		}
	}
	return n
}

// sandboxRules: the run directory read-write, the configured trees
// read-only, the system's executable trees read-only and executable, what
// CPython reads outside them, and execute for the program binary
// (execRules). Nothing is both writable and executable.
func sandboxRules(c sandboxConf) []llRule {
	var rules []llRule
	for _, p := range c.rw {
		rules = append(rules, llRule{path: p, access: llReadWrite, must: true})
	}
	for _, p := range c.ro {
		rules = append(rules, llRule{path: p, access: llRead})
	}
	for _, p := range c.exec {
		rules = append(rules, llRule{path: p, access: llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE})
	}
	for _, p := range c.list {
		rules = append(rules, llRule{path: p, access: unix.LANDLOCK_ACCESS_FS_READ_DIR})
	}
	if len(c.prog) > 0 {
		rules = append(rules, execRules(c.prog[0])...)
	}
	rules = append(rules, llRule{path: c.nsRoot + "/dev/shm", access: llReadWrite}) // the run's own tmpfs
	for _, p := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		rules = append(rules, llRule{path: p, access: llDevice})
	}
	// The distribution's name and version (public; pip reads them for its
	// User-Agent and fails on a PermissionError where a missing file is fine).
	for _, p := range []string{"/dev/urandom", "/dev/random", "/etc/ld.so.cache",
		"/etc/os-release", "/etc/debian_version", "/etc/lsb-release"} {
		rules = append(rules, llRule{path: p, access: unix.LANDLOCK_ACCESS_FS_READ_FILE})
	}
	// This namespace's own /proc (mounted by the init): /proc/self and the
	// run's own processes, nothing of the host's.
	rules = append(rules, llRule{path: c.nsRoot + "/proc", access: unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR})
	return rules
}

// execRules grants EXECUTE on the program binary (the interpreter) and on
// its ELF program interpreter (PT_INTERP, the dynamic loader), which may lie
// outside the system's executable trees (an interpreter installed under a
// home directory). The kernel opens both with __FMODE_EXEC, which Landlock
// checks against EXECUTE; the shared libraries the loader then maps are
// ordinary reads. Landlock rules attach to inodes, and llAddPath opens the
// paths following symlinks, so a symlinked interpreter or loader gets the
// right on the file the kernel opens. A program that is not a dynamic ELF
// (a static binary) gets the rule on itself alone.
func execRules(prog string) []llRule {
	rules := []llRule{{path: prog, access: llExec, must: true}}
	if interp := elfInterp(prog); interp != "" {
		rules = append(rules, llRule{path: interp, access: llExec, must: true})
	}
	return rules
}

// The relay: the program's wait status and rusage, from the init to the
// daemon, in one write below PIPE_BUF.
const (
	relayMagic = 0x636f646572756e31 // "coderun1"
	relaySize  = 7 * 8
)

func encodeRelay(ws unix.WaitStatus, ru unix.Rusage) []byte {
	b := make([]byte, 0, relaySize)
	for _, v := range []int64{relayMagic, int64(ws), ru.Utime.Sec, ru.Utime.Usec, ru.Stime.Sec, ru.Stime.Usec, ru.Maxrss} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// A member's record (relayMembers): its pid in the namespace, whether the
// init's CPU bound killed it (1, else 0), then a relay.
const memberSize = 16 + relaySize

func encodeMember(pid int, bound bool, ws unix.WaitStatus, ru unix.Rusage) []byte {
	var flag uint64
	if bound {
		flag = 1
	}
	b := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(pid)), flag)
	return append(b, encodeRelay(ws, ru)...)
}

// decodeMember is a member's pid and its end (Exit.CPUBound from the flag).
func decodeMember(b []byte) (pid int, e spawn.Exit, ok bool) {
	if len(b) != memberSize || binary.LittleEndian.Uint64(b[8:]) > 1 {
		return 0, e, false
	}
	ws, ru, ok := decodeRelay(b[16:])
	e = spawn.ExitOf(ws, ru)
	e.CPUBound = binary.LittleEndian.Uint64(b[8:]) == 1
	return int(binary.LittleEndian.Uint64(b)), e, ok
}

func decodeRelay(b []byte) (unix.WaitStatus, unix.Rusage, bool) {
	var ru unix.Rusage
	if len(b) != relaySize || binary.LittleEndian.Uint64(b) != relayMagic {
		return 0, ru, false
	}
	v := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	ru.Utime.Sec, ru.Utime.Usec = v(2), v(3)
	ru.Stime.Sec, ru.Stime.Usec = v(4), v(5)
	ru.Maxrss = v(6)
	return unix.WaitStatus(uint32(v(1))), ru, true
}
