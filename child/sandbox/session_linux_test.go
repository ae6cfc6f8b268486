//go:build linux

package sandbox

import (
	"bufio"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// orphanScript double-forks F, which leads its own session and sleeps: F is
// orphaned to the namespace's init. The program prints F's pid, then "done"
// once F's parent has exited, and exits 3. F itself writes its pid, after its
// setsid, so the pid is never seen before F leads its session.
const orphanScript = `import os, sys, time
r, w = os.pipe()
m = os.fork()
if m == 0:
    if os.fork() == 0:
        os.setsid()
        os.write(w, b"%d\n" % os.getpid())
        for fd in (0, 1, 2, r, w):
            os.close(fd)
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.waitpid(m, 0)
sys.stdout.write(os.read(r, 64).decode() + "done\n")
sys.stdout.flush()
os._exit(3)
`

// A session's Process is its interpreter, leading its own group; a process
// orphaned to the namespace's init that leads its own session is adopted
// once, outlives the interpreter, and the namespace ends with the last
// member.
func TestSessionFamily(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.Session = true
	p, _ := startPython(t, &sb, orphanScript)
	defer spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
	if pgrp, _, ok := groupOf(p.Pid); ok && pgrp != p.Pid {
		t.Errorf("the interpreter %d is in group %d, want its own", p.Pid, pgrp)
	}
	p.Stdout.SetReadDeadline(time.Now().Add(20 * time.Second))
	out := bufio.NewScanner(p.Stdout)
	var lines []string
	for out.Scan() && out.Text() != "done" {
		lines = append(lines, out.Text())
	}
	if len(lines) != 1 {
		t.Fatalf("program output %q", lines)
	}
	nspid, err := strconv.Atoi(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Adopt(nspid + 1000); err == nil || !strings.Contains(err.Error(), "not a child") {
		t.Errorf("adopting a pid that is no child of the init: %v", err)
	}
	f, err := p.Adopt(nspid)
	if err != nil {
		t.Fatalf("adopt: %v", err)
	}
	if _, err := p.Adopt(nspid); err == nil || !strings.Contains(err.Error(), "already a member") {
		t.Errorf("adopting a member twice: %v", err)
	}
	if e, err := p.Wait(); err != nil || e.Code != 3 {
		t.Errorf("the interpreter's exit: %+v %v", e, err)
	}
	if f.GroupEmpty() {
		t.Fatal("the adopted member died with the interpreter")
	}
	f.SignalGroup(syscall.SIGKILL)
	if e, err := f.Wait(); err != nil || e.Signal != "SIGKILL" {
		t.Errorf("the member's exit: %+v %v", e, err)
	}
	// leakcheck: the init, and with it the namespaces, are gone
}
