package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Persistent sessions (docs/protocol-sessions.md §11): a run in an open session
// against a warm fresh run, state kept over many runs, forking a session that
// holds 100 MB, and what idle sessions cost the daemon.

// withSessions runs fn only on a daemon that has sessions: a build without
// them (an older baseline) gives no rows.
func withSessions(fn func(d *daemon) ([]row, error)) func(d *daemon) ([]row, error) {
	return func(d *daemon) ([]row, error) {
		if noSessions(d) {
			return nil, nil
		}
		return fn(d)
	}
}

// noSessions says so on stderr when d has no sessions.
func noSessions(d *daemon) bool {
	if d.sessions == 0 {
		fmt.Fprintln(os.Stderr, "bench: the daemon has no sessions; session rows skipped")
	}
	return d.sessions == 0
}

// openSession opens a session with the daemon's defaults on d and returns
// its id.
func (d *daemon) openSession() (string, error) {
	m, err := call(d.conn, "session/open", map[string]any{})
	if err != nil {
		return "", err
	}
	return sessionID(m.Result)
}

// forkSession forks session id and returns the new session's id.
func (d *daemon) forkSession(id string) (string, error) {
	m, err := call(d.conn, "session/fork", map[string]any{"sessionId": id})
	if err != nil {
		return "", err
	}
	return sessionID(m.Result)
}

func (d *daemon) closeSession(id string) error {
	_, err := call(d.conn, "session/close", map[string]any{"sessionId": id})
	return err
}

// runIn runs program in session id and fails unless it succeeds.
func (d *daemon) runIn(id, program string) (runResult, error) {
	return d.run(program, map[string]any{"sessionId": id})
}

func sessionID(raw json.RawMessage) (string, error) {
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("no sessionId in %s (%v)", raw, err)
	}
	return r.SessionID, nil
}

// withSession runs fn on a session opened on d, closed afterwards.
func withSession(d *daemon, fn func(id string) ([]row, error)) ([]row, error) {
	id, err := d.openSession()
	if err != nil {
		return nil, err
	}
	rows, err := fn(id)
	if cerr := d.closeSession(id); err == nil {
		err = cerr
	}
	return rows, err
}

// sessionReturn1Rows times return 1 in an open session, back to back and
// paced (the idle child is then frozen, docs/containment-start-modes.md §4.3), next to
// a warm fresh run (paced, so the pool is ready) in the same group, and
// reports how many times faster the session run is.
func sessionReturn1Rows(o options, d *daemon, floor float64) ([]row, error) {
	return withSession(d, func(id string) ([]row, error) {
		if _, err := d.runIn(id, "return 1"); err != nil {
			return nil, err
		}
		in, err := timeN(o.samples, func() error { _, err := d.runIn(id, "return 1"); return err })
		if err != nil {
			return nil, err
		}
		fresh, frozen := make(samples, 0, o.samples/5+1), make(samples, 0, o.samples/5+1)
		for range cap(fresh) {
			took, err := pacedRun(d, "return 1", nil)
			if err != nil {
				return nil, err
			}
			fresh = append(fresh, took)
			// After the pause the idle session's child is frozen: the run
			// pays its thaw.
			if took, err = pacedRun(d, "return 1", map[string]any{"sessionId": id}); err != nil {
				return nil, err
			}
			frozen = append(frozen, took)
		}
		speedup := float64(fresh.pct(50)) / float64(in.pct(50))
		return []row{
			newRow("return 1, in an open session, p50", "ms", floor, ms(in.pct(50)), "target ≤ 0.5 ms"),
			newRow("return 1, in an open session, p90", "ms", floor, ms(in.pct(90)), ""),
			newRow("return 1, in a session idle long enough to be frozen (paced), p50", "ms", floor, ms(frozen.pct(50)), "pays the thaw"),
			newRow("return 1, warm fresh run (paced), p50", "ms", floor, ms(fresh.pct(50)), "same group, same daemon"),
			newRow("warm fresh run ÷ session run, p50", "x", 0, speedup, "target ≥ 5"),
		}, nil
	})
}

// sessionStateRows runs x = x + 1 many times in one session: the state must
// be kept, and the daemon's RSS and open descriptors must not grow.
func sessionStateRows(o options, d *daemon) ([]row, error) {
	n := 1000
	if o.quick {
		n = 20
	}
	return withSession(d, func(id string) ([]row, error) {
		if _, err := d.runIn(id, "x = 0"); err != nil {
			return nil, err
		}
		pid := d.cmd.Process.Pid
		rssBefore, fdsBefore := procStatusKb(pid, "VmRSS"), fdCount(pid)
		var last runResult
		s, err := timeN(n, func() error {
			var err error
			last, err = d.runIn(id, "x = x + 1\nreturn x")
			return err
		})
		if err != nil {
			return nil, err
		}
		if string(last.Value) != fmt.Sprint(n) {
			return nil, fmt.Errorf("state lost: the last of %d runs returned %s", n, last.Value)
		}
		rssAfter, fdsAfter := procStatusKb(pid, "VmRSS"), fdCount(pid)
		label := fmt.Sprintf("%d runs of x = x + 1 in one session", n)
		return []row{
			newRow(label+", p50", "ms", 0, ms(s.pct(50)), fmt.Sprintf("the last returned %d", n)),
			newRow(label+", daemon RSS growth", "MB", 0, (rssAfter-rssBefore)/1024,
				fmt.Sprintf("%.1f → %.1f MB", rssBefore/1024, rssAfter/1024)),
			newRow(label+", daemon fd growth", "fds", 0, float64(fdsAfter-fdsBefore),
				fmt.Sprintf("%d → %d", fdsBefore, fdsAfter)),
		}, nil
	})
}

// fdCount is the number of open descriptors of pid.
func fdCount(pid int) int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries)
}

// bigSession fills a session with 100 MiB of Python objects (102 400
// bytearrays of 1 KiB) and says how to check that a fork sees them.
const (
	bigSession      = "data = [bytearray(1024) for _ in range(100 * 1024)]"
	bigSessionCheck = "return len(data) * len(data[-1])"
	bigSessionBytes = 100 * 1024 * 1024
)

// sessionForkRows times session/fork of a session holding 100 MiB; each
// fork's first run must see the data, then the fork is closed (untimed).
func sessionForkRows(o options, d *daemon) ([]row, error) {
	n := 20
	if o.quick {
		n = 2
	}
	if !d.forks {
		fmt.Fprintln(os.Stderr, "bench: the daemon cannot fork sessions; session/fork rows skipped")
		return nil, nil
	}
	return withSession(d, func(id string) ([]row, error) {
		if _, err := d.run(bigSession, map[string]any{"sessionId": id, "limits": map[string]any{"maxWallMs": 60000}}); err != nil {
			return nil, err
		}
		s := make(samples, 0, n)
		for range n {
			start := time.Now()
			fork, err := d.forkSession(id)
			if err != nil {
				return nil, err
			}
			s = append(s, time.Since(start))
			r, err := d.runIn(fork, bigSessionCheck)
			if err == nil && string(r.Value) != fmt.Sprint(bigSessionBytes) {
				err = fmt.Errorf("the fork's first run saw %s bytes, not %d", r.Value, bigSessionBytes)
			}
			if cerr := d.closeSession(fork); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		}
		return []row{
			newRow("session/fork of a session holding 100 MiB, p50", "ms", 0, ms(s.pct(50)), "target ≤ 10 ms; each fork's first run saw the data"),
			newRow("session/fork of a session holding 100 MiB, p90", "ms", 0, ms(s.pct(90)), ""),
		}, nil
	})
}

// idleSessions is how many sessions the idle-memory row opens (the default
// CODERUN_MAX_SESSIONS).
const idleSessions = 16

// sessionIdleRows opens 16 sessions on a daemon of its own and leaves them
// idle: the daemon's RSS beyond its baseline, and the children's own RSS
// (their pids come from the sessions themselves, so tier process only: in
// tier sandbox they name another PID namespace and that row is left out).
func sessionIdleRows(o options) ([]row, error) {
	d, err := startDaemon(o, fmt.Sprintf("CODERUN_MAX_SESSIONS=%d", idleSessions))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	if noSessions(d) {
		return nil, nil
	}
	if _, err := d.run("return 1", nil); err != nil {
		return nil, err
	}
	pid := d.cmd.Process.Pid
	settle := func() float64 {
		time.Sleep(refillPause)
		return procStatusKb(pid, "VmRSS")
	}
	base := settle()
	var childrenKb float64
	for range idleSessions {
		id, err := d.openSession()
		if err != nil {
			return nil, err
		}
		r, err := d.runIn(id, "import os\nreturn os.getpid()")
		if err != nil {
			return nil, err
		}
		var child int
		_ = json.Unmarshal(r.Value, &child)
		childrenKb += procStatusKb(child, "VmRSS")
	}
	held := settle()
	label := fmt.Sprintf("%d idle sessions", idleSessions)
	rows := []row{newRow(label+": daemon RSS beyond baseline", "MB", 0, (held-base)/1024,
		fmt.Sprintf("target ≤ 2 MB; %.1f → %.1f MB", base/1024, held/1024))}
	if d.isolation == "process" {
		rows = append(rows, newRow(label+": the children's RSS, summed", "MB", 0, childrenKb/1024, "shared pages counted in each child"))
	}
	return rows, nil
}
