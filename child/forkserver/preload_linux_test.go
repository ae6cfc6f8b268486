//go:build linux

package forkserver

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// startTalkingServer runs a Python script as the server that sends each of
// msgs on the control socket, then exits.
func startTalkingServer(t *testing.T, msgs ...string) *Server {
	t.Helper()
	script := "import socket, sys\nctl = socket.socket(fileno=3)\nfor m in sys.argv[1:]:\n    ctl.send(m.encode())\n"
	s, err := Start(child.Spec{Path: childtest.RealPython(t), Args: append([]string{"-I", "-c", script}, msgs...),
		Env: []string{leakcheck.Tag()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// C876: a server's preload report: W and F name a module, R comes once and
// last; anything else (a second R, a report after R, a name that is not a
// module's, sizes that are not numbers) is a protocol error that ends it.
func TestPreloadReport(t *testing.T) {
	leakcheck.Check(t)
	s := startTalkingServer(t, "W numpy ImportError: no BLAS", "W x.y_z RuntimeError: a b  c", "R 196608 102400")
	<-s.Ready()
	p := s.Preload()
	if len(p.Skipped) != 2 || p.Skipped[0] != (ModuleError{"numpy", "ImportError: no BLAS"}) ||
		p.Skipped[1].Module != "x.y_z" || p.Failed != nil || p.VmSizeKb != 196608 || p.VmRSSKb != 102400 {
		t.Errorf("preload %+v", p)
	}
	for _, msgs := range [][]string{
		{"R 1 1", "R 1 1"},
		{"R 1 1", "W numpy late"},
		{"W bad/name why"},
		{"F 1x why"},
		{"W  why"},
		{"R 1"},
		{"R -1 2"},
		{"F pandas boom", "R 1 1"},
	} {
		s := startTalkingServer(t, msgs...)
		<-s.Done()
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "malformed control message") {
			t.Errorf("%q: %v, want a protocol error", msgs, err)
		}
	}
	s = startTalkingServer(t, "F pandas ImportError: boom")
	<-s.Done()
	if p := s.Preload(); p.Failed == nil || p.Failed.Error() != `module "pandas": ImportError: boom` {
		t.Errorf("failed preload %+v", p.Failed)
	}
}
