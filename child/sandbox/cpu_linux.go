//go:build linux

package sandbox

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The init watches the run (watchRun): the memory cgroup's limit, set from
// the program's RLIMIT_AS (cgroup_linux.go), and the CPU of the whole run.
//
// The run's CPU budget bounds the run, not each process. RLIMIT_CPU, which
// the child sets at boot, is per process: four children each just under it
// would use four budgets. So the init, PID 1 of the run's PID namespace,
// adds up the CPU of every process of the run and SIGKILLs them all once
// the sum reaches the budget. The relay then carries that sum as the
// program's CPU (runRusage), so the daemon classifies the end as it does a
// hard RLIMIT_CPU kill: SIGKILL with CPU at or over the effective soft limit
// is timeout/cpu (docs/child-protocol-daemon.md §4.8).
//
// The budget is read from the program's own RLIMIT_CPU (prlimit), which the
// child sets at boot — soft the effective limit, hard one second more — so
// the init needs no budget of its own and a warm child, started before its
// run's limits are known, is covered too. The program may raise its soft
// limit up to the hard one (and each SIGXCPU raises it by a second), so the
// budget is the lowest soft limit seen, and never more than hard − 1.
//
// A session's child (docs/child-protocol-sessions.md §6.2) raises its own soft limit
// before each run, so there the budget is hard − 1 alone (the session's
// lifetime total): each run is bounded by its soft limit per process and by
// the daemon's sampling of the session's CPU.
//
// The sum needs no cgroup, so it works for root and unprivileged daemons
// alike: the init's children rusage (everything it reaped: orphans, and
// every process once the run ends) plus, for every live or zombie process of
// the namespace, /proc/<pid>/stat utime+stime (its threads, dead ones
// included) and cutime+cstime (the children it reaped).

const (
	cpuPoll    = 100 * time.Millisecond              // between two sums
	cpuConfirm = 10 * time.Millisecond               // before the sum that confirms an overrun
	userHZ     = 100                                 // /proc clock ticks per second (USER_HZ)
	maxBudget  = math.MaxInt64 / uint64(time.Second) // seconds a Duration holds; above: no budget
)

// cpuAtKill is the run's CPU (nanoseconds) that watchRun counted when it
// killed the run for its CPU budget; 0 when it did not. The relay reports at
// least that much: the reaped total is assembled from each process's own
// rounded figures and can fall a tick short of the sum that decided the
// kill, and the daemon must see the CPU timeout the watcher saw.
var cpuAtKill atomic.Int64

// watchRun enforces the run's budgets that no rlimit can: it sets the
// memory cgroup's limits (memFds, none without a memory cgroup) to prog's
// RLIMIT_AS, and kills every process of the run once the run's CPU reaches
// the budget of prog's RLIMIT_CPU, as two sums in a row show (a process
// reaped between the reading of its own line and of its parent's would be
// counted twice in one sum). A limit the kernel refuses to set (v1 cannot
// shrink below what the run already holds) kills the run too. It returns
// when it has killed, or when prog is gone (in a session's namespace, whose
// forks of prog may outlive it, it goes on with prog's last budget).
func watchRun(prog int, memFds []int, session bool) {
	lowestSoft, lastBudget := uint64(math.MaxUint64), uint64(unix.RLIM_INFINITY)
	memLimit := uint64(unix.RLIM_INFINITY)
	pause := cpuPoll
	for {
		time.Sleep(pause)
		if !limitMemory(prog, memFds, &memLimit) {
			unix.Kill(-1, unix.SIGKILL)
			return
		}
		budget, ok := cpuBudget(prog, &lowestSoft, session)
		switch {
		case ok:
			lastBudget = budget
		case session: // forks of the program may outlive it, under the same lifetime total
			budget = lastBudget
		default:
			return
		}
		used := runCPU()
		switch over := budget <= maxBudget && used >= time.Duration(budget)*time.Second; {
		case over && pause == cpuConfirm:
			cpuAtKill.Store(int64(used))
			unix.Kill(-1, unix.SIGKILL)
			return
		case over:
			pause = cpuConfirm
		default:
			pause = cpuPoll
		}
	}
}

// limitMemory lowers the memory cgroup's limits to prog's RLIMIT_AS hard
// limit when that is below *limit (the value in force), and reports whether
// the limit holds (true also when prog is gone: there is nothing to bound).
func limitMemory(prog int, memFds []int, limit *uint64) bool {
	var rl unix.Rlimit
	if len(memFds) == 0 || unix.Prlimit(prog, unix.RLIMIT_AS, nil, &rl) != nil || rl.Max >= *limit {
		return true
	}
	v := []byte(strconv.FormatUint(rl.Max, 10))
	for _, fd := range memFds {
		if writeLimit(fd, v) != nil {
			return false
		}
	}
	*limit = rl.Max
	return true
}

// writeLimit writes a cgroup limit file, again while the write is
// interrupted: lowering a v1 memory limit reclaims, and the reclaim gives up
// with EINTR when a signal is pending, which the Go runtime's own preemption
// signal (SIGURG) often is on a busy machine.
func writeLimit(fd int, v []byte) error {
	for {
		_, err := unix.Pwrite(fd, v, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// cpuBudget returns the run's CPU budget in seconds (RLIM_INFINITY: none) from
// prog's RLIMIT_CPU (budgetOf); false once prog is gone.
func cpuBudget(prog int, lowestSoft *uint64, session bool) (uint64, bool) {
	var rl unix.Rlimit
	if err := unix.Prlimit(prog, unix.RLIMIT_CPU, nil, &rl); err != nil {
		return 0, false
	}
	return budgetOf(rl, lowestSoft, session), true
}

// budgetOf is the budget of an RLIMIT_CPU reading: hard − 1 (hard when
// below 2 or infinite), and for a run that is not a session's no more than
// the lowest soft limit seen, which it lowers *lowestSoft to.
func budgetOf(rl unix.Rlimit, lowestSoft *uint64, session bool) uint64 {
	hard := rl.Max
	if hard != unix.RLIM_INFINITY && hard >= 2 {
		hard--
	}
	if session {
		return hard
	}
	*lowestSoft = min(*lowestSoft, rl.Cur)
	return min(*lowestSoft, hard)
}

// runCPU is the CPU time of every process of the run so far (the init's own
// excluded). The init's children rusage is read first and the processes in
// ascending pid order (parents before their children, in a namespace whose
// pids do not wrap): a process reaped while the sum is taken is then
// missed, not counted twice.
func runCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	var ticks uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err == nil {
			ticks += statCPUTicks(b)
		}
	}
	return total + time.Duration(ticks)*time.Second/userHZ
}

// statCPUTicks is utime+stime+cutime+cstime (fields 14-17) of a
// /proc/<pid>/stat line, 0 if it cannot be parsed. Fields are counted after
// the last ')': the command name may contain anything.
func statCPUTicks(stat []byte) uint64 {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := bytes.Fields(stat[i+1:])
	const first = 14 - 3 // fields[0] is field 3 (state)
	if len(fields) < first+4 {
		return 0
	}
	var sum uint64
	for _, f := range fields[first : first+4] {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0
		}
		sum += v
	}
	return sum
}

// runRusage is the rusage the init relays for the program: the program's
// own, with its CPU replaced by the whole run's (every process has been
// reaped by now, so the init's children rusage holds them all), and never
// less than the CPU a budget kill was decided on (cpuAtKill).
func runRusage(prog unix.Rusage) unix.Rusage {
	var all unix.Rusage
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &all) == nil {
		prog.Utime, prog.Stime = all.Utime, all.Stime
	}
	if short := cpuAtKill.Load() - prog.Utime.Nano() - prog.Stime.Nano(); short > 0 {
		prog.Utime = unix.NsecToTimeval(prog.Utime.Nano() + short)
	}
	return prog
}
