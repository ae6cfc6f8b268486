//go:build linux

package child_test

import (
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestStartKillWaitConcurrently: many goroutines start, kill and reap
// children at once (the single spawner thread serialises the forks); every
// one is reaped with SIGKILL and nothing is left open.
func TestStartKillWaitConcurrently(t *testing.T) {
	leakcheck.Check(t)
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("no /bin/sleep")
	}
	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			p, err := child.Start(child.Spec{Path: "/bin/sleep", Args: []string{"30"}, Env: []string{leakcheck.Tag()}})
			if err != nil {
				t.Error(err)
				return
			}
			defer spawn.CloseFiles(p.Conn, p.Stdout, p.Stderr)
			exited := make(chan child.Exit, 1)
			go func() { e, _ := p.Wait(); exited <- e }()
			p.SignalGroup(syscall.SIGKILL)
			select {
			case e := <-exited:
				if e.Signal != "SIGKILL" {
					t.Errorf("pid %d: %+v", p.Pid, e)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("pid %d not reaped", p.Pid)
			}
			if !p.GroupEmpty() {
				t.Errorf("pid %d: group not empty after reaping", p.Pid)
			}
		})
	}
	wg.Wait()
}
