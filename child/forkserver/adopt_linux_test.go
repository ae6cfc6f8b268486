//go:build linux

package forkserver

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// orphans is a program whose child double-forks two processes that outlive
// it, one leading its own session (what a session's fork is) and one not.
const orphans = `import os, time
def orphan(leader):
    r, w = os.pipe()
    if os.fork() == 0:
        if os.fork() == 0:
            if leader:
                os.setsid()
            os.write(w, b"%d\n" % os.getpid())
            time.sleep(60)
            os._exit(0)
        os._exit(0)
    os.wait()
    return int(os.read(r, 32))
return [orphan(True), orphan(False)]`

// runProgram boots p (a fresh child) and runs program; it returns the done frame.
func runProgram(t *testing.T, conn *os.File, program string) string {
	t.Helper()
	prog, _ := json.Marshal(program)
	frames := `{"type":"boot","cpuSeconds":30,"addressSpaceBytes":1073741824,"maxLogBytes":65536,` +
		`"maxValueBytes":65536,"maxOutputBytes":65536,"namespaces":[]}` + "\n" + `{"type":"run","program":` + string(prog) + "}\n"
	if _, err := conn.Write([]byte(frames)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("no done frame: %v", err)
		}
		if strings.Contains(line, `"type": "done"`) || strings.Contains(line, `"type":"done"`) {
			return line
		}
	}
}

// The server adopts an orphan only when it is its child, leads its own
// session and is not already known: a pid a program names is checked, never
// trusted (docs/child-protocol-sessions.md §6.5). The adopted fork is then reported
// and signalled like a spawned child.
func TestForkServerAdopt(t *testing.T) {
	leakcheck.Check(t)
	s := startRealForkServer(t)
	p, err := s.Spawn(forkSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.SignalGroup(syscall.SIGKILL) // the non-leader orphan is in p's group
		p.Wait()
		// The server reaps the orphan (its subreaper); closing the server first
		// would hand the zombie to this test binary.
		for deadline := time.Now().Add(10 * time.Second); !p.GroupEmpty() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		p.Conn.Close()
		p.Stdout.Close()
		p.Stderr.Close()
	}()
	var done struct{ Value [2]int }
	if err := json.Unmarshal([]byte(runProgram(t, p.Conn, orphans)), &done); err != nil {
		t.Fatal(err)
	}
	leader, member := done.Value[0], done.Value[1]
	for _, pid := range []int{member, os.Getpid(), p.Pid, 0} {
		if _, err := s.Adopt(pid); err == nil {
			t.Errorf("Adopt(%d) succeeded; only an unclaimed session leader may be adopted", pid)
		}
	}
	f, err := s.Adopt(leader)
	if err != nil {
		t.Fatalf("Adopt(%d): %v", leader, err)
	}
	if _, err := s.Adopt(leader); err == nil {
		t.Errorf("a second Adopt(%d) succeeded", leader)
	}
	if f.GroupEmpty() {
		t.Errorf("the adopted fork's group is empty")
	}
	f.SignalGroup(syscall.SIGKILL)
	e, err := f.Wait()
	if err != nil || !e.Signaled || e.Signal != "SIGKILL" {
		t.Errorf("adopted fork's relayed exit = %+v, %v; want SIGKILL", e, err)
	}
	if _, err := p.Adopt(leader); err == nil {
		t.Errorf("a reaped fork was adopted again")
	}
}
