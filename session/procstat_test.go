package session

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// treeUsage reads the test binary's own /proc entries and reports a reaped
// pid as gone.
func TestTreeUsageReadsProc(t *testing.T) {
	cpu, hwm, ok := treeUsage(os.Getpid(), true)
	if !ok || hwm <= 0 || cpu < 0 {
		t.Fatalf("own usage: cpu %v hwm %d ok %v", cpu, hwm, ok)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := treeUsage(cmd.Process.Pid, true); ok {
		t.Errorf("a reaped pid %d read as alive", cmd.Process.Pid)
	}
}

// readProc reads a whole file, past its first 4 KiB buffer.
func TestReadProcWholeFile(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 1000)
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := readProc(p); !ok || !bytes.Equal(got, want) {
		t.Errorf("read %d bytes (ok %v), want %d", len(got), ok, len(want))
	}
	if _, ok := readProc(filepath.Join(t.TempDir(), "missing")); ok {
		t.Error("a missing file read as ok")
	}
}
