//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// buildLean builds cmd/coderun-sandbox-init as `make build` does and
// returns its image.
func buildLean(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "coderun-sandbox-init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin,
		"github.com/coderun-rpc/coderun-rpc/cmd/coderun-sandbox-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	image, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// useHelper makes h the helper binary of this test's sandboxes.
func useHelper(t *testing.T, h helperBinary) {
	saved := helper
	helper = func() helperBinary { return h }
	t.Cleanup(func() { helper = saved })
}

// TestLeanHelper: with the lean init's image, the sandbox's stages run from
// a sealed memory file that refuses writes; a run started through it is
// confined as ever, its init is that file, and the program inherits none of
// it (descriptors 0-3 only).
func TestLeanHelper(t *testing.T) {
	leakcheck.Check(t)
	image := buildLean(t)
	h := chooseHelper(image)
	if h.mem == nil {
		t.Fatalf("the lean init was not chosen: %s", h.what)
	}
	defer h.mem.Close()
	if !strings.HasPrefix(h.path, "/proc/self/fd/") || !strings.Contains(h.what, "lean init") {
		t.Errorf("helper %q (%s), want a /proc/self/fd path and the lean init", h.path, h.what)
	}
	if fd, _ := strconv.Atoi(strings.TrimPrefix(h.path, "/proc/self/fd/")); fd < helperFdFloor {
		t.Errorf("the memory file is descriptor %d, want at least %d", fd, helperFdFloor)
	}
	if _, err := h.mem.WriteAt([]byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("writing into the helper: %v, want EPERM (sealed)", err)
	}
	useHelper(t, h)

	sb := testSandbox(t)
	const script = `import json, os
print(json.dumps({"procs": sorted(int(d) for d in os.listdir("/proc") if d.isdigit()),
  "fds": sorted(int(d) for d in os.listdir("/proc/self/fd"))}), flush=True)
os.read(3, 1)`
	p, _ := startPython(t, &sb, script)
	line := make([]byte, 4096)
	p.Stdout.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := p.Stdout.Read(line)
	if err != nil {
		t.Fatalf("reading the program's line: %v", err)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid) + "/exe")
	if err != nil || !strings.HasPrefix(exe, "/memfd:coderun-sandbox-init") {
		t.Errorf("the init runs %q (%v), want the memory file /memfd:coderun-sandbox-init", exe, err)
	}
	p.Conn.Write([]byte{0})
	r := finish(t, p, 20*time.Second)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stderr %q", r.exit, r.stderr)
	}
	var got struct{ Procs, Fds []int }
	if err := json.Unmarshal(line[:n], &got); err != nil {
		t.Fatalf("%v: %q", err, line[:n])
	}
	if len(got.Procs) != 2 || got.Procs[0] != 1 {
		t.Errorf("/proc inside lists %v, want the init and the program", got.Procs)
	}
	if len(got.Fds) != 5 { // 0-3 and listdir's own
		t.Errorf("descriptors %v, want 0-3 (and listdir's)", got.Fds)
	}
}

// TestHelperFallsBack: with no image, or one the kernel will not execute,
// the sandbox's stages run from this binary, and HelperBinary says why.
func TestHelperFallsBack(t *testing.T) {
	leakcheck.Check(t)
	for _, c := range []struct {
		image []byte
		why   string
	}{
		{nil, "no lean init embedded"},
		{[]byte("not an executable"), "did not start"},
	} {
		h := chooseHelper(c.image)
		if h.mem != nil || h.path != "/proc/self/exe" || !strings.Contains(h.what, c.why) {
			t.Errorf("image %q: helper %q (%s), want /proc/self/exe, saying %q", c.image, h.path, h.what, c.why)
		}
	}
}
