//go:build linux

package childtest

// Hostile and reporting children, run by re-executing the test binary
// (os/exec's TestHelperProcess pattern): Main switches on HelperVar.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// HelperVar, in a test binary's environment, names the helper mode it runs
// as (see Main) instead of running tests.
const HelperVar = "CHILD_TEST_HELPER"

// HelperLife bounds every helper so a broken test cannot leave one running
// for long.
const HelperLife = 60 * time.Second

// Main is the tail of the TestMain of the packages under child: a test
// binary started with HelperVar set runs that helper mode and exits;
// otherwise it becomes a child subreaper and runs the tests, which fail when
// they leave anything named coderun-* in /tmp (leakcheck.Suite). Callers first
// dispatch their own re-executed helpers (HelperMain, stand-in daemons).
func Main(m *testing.M) {
	if mode, ok := os.LookupEnv(HelperVar); ok {
		// syscall.Exit, not os.Exit: a race-enabled binary otherwise sleeps
		// a second at exit (the race runtime's atexit_sleep_ms).
		runHelper(mode, os.Args[1:])
		syscall.Exit(0)
	}
	// Orphaned grandchildren are reparented to the test binary rather than
	// to PID 1, whatever PID 1 is: tests can reap them, and leakcheck sees
	// (and fails) any that are left.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(2)
	}
	os.Exit(leakcheck.Suite(m))
}

// Report is what the "report" helper tells the test about itself.
type Report struct {
	Pid, Ppid, Pgid, Sid int
	Fds                  map[int]string
	Fd0DevNull           bool
	Fd3Domain, Fd3Type   int
	Nonblock             map[int]bool
	Env                  []string
	Cwd                  string
}

func runHelper(mode string, args []string) {
	fd3 := os.NewFile(3, "fd3")
	switch mode {
	case "report":
		r := selfReport() // first, before the runtime opens anything else
		bufio.NewReader(fd3).ReadString('\n')
		json.NewEncoder(fd3).Encode(r)
	case "sleep": // [quiet]: sleep, announcing "ready" on fd 3 unless quiet
		if len(args) == 0 {
			fd3.Write([]byte("ready\n"))
		}
		time.Sleep(HelperLife)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fd3.Write([]byte("ready\n"))
		time.Sleep(HelperLife)
	case "grandchild": // group|setsid: leave a grandchild holding fds 1-3, print its pid on fd 3, exit 0
		pid := startGrandchild(args[0] == "setsid", os.Stdout, fd3)
		fmt.Fprintf(fd3, "%d\n", pid)
	case "family": // start a same-group and a setsid'd sleeper, print "<pid> <pid>" on fd 3, sleep
		fmt.Fprintf(fd3, "%d %d\n", startGrandchild(false, os.Stdout, nil), startGrandchild(true, os.Stdout, nil))
		time.Sleep(HelperLife)
	case "flood": // n: write n bytes (0: forever) to stdout, no newline
		flood(atoi(args[0]))
	case "exit":
		syscall.Exit(atoi(args[0]))
	case "burn": // ms: burn CPU until this process has used ms of it
		burn(time.Duration(atoi(args[0])) * time.Millisecond)
	case "selfsignal":
		syscall.Kill(os.Getpid(), unix.SignalNum(args[0]))
		time.Sleep(HelperLife)
	case "daemon": // Start a sleeper from a thread that then exits; print its pid; sleep
		daemon()
	case "cpu-set": // soft,hard,req,req… per case; the last one inherited through exec
		cpuSet(args)
	case "cpu-report": // req...: print child.EffectiveSoftCPU(req) for each, on one line
		var got []string
		for _, a := range args {
			got = append(got, strconv.FormatInt(child.EffectiveSoftCPU(int64(atoi(a))), 10))
		}
		fmt.Println(strings.Join(got, " "))
	case "cpu-live": // print child.EffectiveSoftCPU(30), lower soft CPU to 5, print it again
		fmt.Println(child.EffectiveSoftCPU(30))
		unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: 5, Max: unix.RLIM_INFINITY})
		fmt.Println(child.EffectiveSoftCPU(30))
	case "probe-orphan": // print "ok <pid>" where pid is a setsid'd grandchild holding stdout
		fmt.Printf("ok %d\n", startGrandchild(true, os.Stdout, nil))
	case "probe-trap": // ignore SIGTERM, start a same-group grandchild, print its pid, sleep
		signal.Ignore(syscall.SIGTERM)
		fmt.Printf("%d\n", startGrandchild(false, os.Stdout, nil))
		time.Sleep(HelperLife)
	case "emfile": // Start under descriptor pressure, the spawner and poller up before
		emfile(true)
	case "emfile-cold": // the same in a process whose first Start meets the pressure
		emfile(false)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		syscall.Exit(99)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func selfReport() Report {
	r := Report{Pid: os.Getpid(), Ppid: os.Getppid(), Pgid: syscall.Getpgrp(), Fds: map[int]string{}, Nonblock: map[int]bool{}}
	r.Sid, _ = unix.Getsid(0)
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		fd := atoi(e.Name())
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			r.Fds[fd] = target
			fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			r.Nonblock[fd] = fl&unix.O_NONBLOCK != 0
		}
	}
	var st0, stNull unix.Stat_t
	if unix.Fstat(0, &st0) == nil && unix.Stat(os.DevNull, &stNull) == nil {
		r.Fd0DevNull = st0.Rdev == stNull.Rdev && st0.Mode&unix.S_IFMT == unix.S_IFCHR
	}
	r.Fd3Domain, _ = unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_DOMAIN)
	r.Fd3Type, _ = unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_TYPE)
	r.Env = os.Environ()
	r.Cwd, _ = os.Getwd()
	return r
}

// startGrandchild starts a quiet sleeper that inherits stdout (and fd 3 when
// given), in this process's group or in a new session, and returns its pid
// without waiting for it.
func startGrandchild(setsid bool, stdout *os.File, fd3 *os.File) int {
	cmd := exec.Command(os.Args[0], "quiet")
	cmd.Env = helperEnv("sleep")
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if fd3 != nil {
		cmd.ExtraFiles = []*os.File{fd3}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	return cmd.Process.Pid
}

func flood(n int) {
	buf := []byte(strings.Repeat("x", 64*1024))
	for written := 0; n == 0 || written < n; {
		chunk := buf
		if n > 0 {
			chunk = buf[:min(len(buf), n-written)]
		}
		k, err := os.Stdout.Write(chunk)
		if err != nil {
			syscall.Exit(3)
		}
		written += k
	}
}

func burn(d time.Duration) {
	for x := 0; ; x++ {
		if x%100000 == 0 {
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= d {
				return
			}
		}
	}
}

func daemon() {
	done := make(chan *child.Process)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread exits with the goroutine
		p, err := child.Start(child.Spec{Path: os.Args[0], Env: []string{HelperVar + "=sleep", "LEAKCHECK_OWNER=" + os.Getenv("LEAKCHECK_OWNER")}})
		if err != nil {
			panic(err)
		}
		done <- p
	}()
	p := <-done
	time.Sleep(100 * time.Millisecond) // let the caller's thread exit
	fmt.Printf("%d\n", p.Pid)
	time.Sleep(HelperLife)
}

// cpuSet takes cases "soft,hard,req,req…" whose hard limits never rise (an
// unprivileged process cannot raise one). For each case it sets RLIMIT_CPU
// and prints child.EffectiveSoftCPU(req) for each req on one line; the last case
// is reported by a re-exec'd cpu-report that inherits the limit instead.
func cpuSet(cases []string) {
	lim := func(s string) uint64 {
		if s == "inf" {
			return unix.RLIM_INFINITY
		}
		return uint64(atoi(s))
	}
	for i, c := range cases {
		f := strings.Split(c, ",")
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: lim(f[0]), Max: lim(f[1])}); err != nil {
			panic(err)
		}
		if i == len(cases)-1 {
			panic(syscall.Exec(os.Args[0], append([]string{os.Args[0]}, f[2:]...), helperEnv("cpu-report")))
		}
		var got []string
		for _, req := range f[2:] {
			got = append(got, strconv.FormatInt(child.EffectiveSoftCPU(int64(atoi(req))), 10))
		}
		fmt.Println(strings.Join(got, " "))
	}
}

// helperEnv is this process's environment with the helper mode replaced.
func helperEnv(mode string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, HelperVar+"=") {
			env = append(env, kv)
		}
	}
	return append(env, HelperVar+"="+mode)
}

// emfile gives child.Start 0, 1, 2 … free descriptor slots (RLIMIT_NOFILE set
// just above the k-th free descriptor number) until it succeeds, printing
// each failure and whether it leaked descriptors. warm starts the spawner
// and the runtime poller first, as the daemon's watchdog has by then;
// otherwise they start under the pressure (and their descriptors show up as
// leaked once they could).
func emfile(warm bool) {
	if warm {
		if err := spawn.Warm(); err != nil {
			panic(err)
		}
	}
	var orig unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &orig)
	before := openFds()
	var free []int
	for fd := 0; len(free) < 20; fd++ {
		if _, open := before[fd]; !open {
			free = append(free, fd)
		}
	}
	for k, soft := range free {
		unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(soft), Max: orig.Max})
		p, err := child.Start(child.Spec{Path: os.Args[0], Env: []string{HelperVar + "=exit", "LEAKCHECK_OWNER=" + os.Getenv("LEAKCHECK_OWNER")}, Args: []string{"0"}})
		unix.Setrlimit(unix.RLIMIT_NOFILE, &orig)
		if err == nil {
			p.Wait()
			p.Conn.Close()
			p.Stdout.Close()
			p.Stderr.Close()
			fmt.Println("started")
			return
		}
		leak := ""
		if after := openFds(); len(after) != len(before) {
			leak = fmt.Sprintf(" leaked: %v -> %v", before, after)
		}
		fmt.Printf("%d free: %v%s\n", k, err, leak)
	}
}

func openFds() map[int]string {
	m := map[int]string{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			m[atoi(e.Name())] = target
		}
	}
	return m
}
