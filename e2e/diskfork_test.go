package e2e

import (
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// TestDiskForkInheritedOldFiles: a session opens three unlinked files
// (sparse, mapped, closed), waits past the birth slack and forks; the parent closes them,
// and the fork fills them through the mappings it inherited. The files
// are older than the fork's directory, so the fork's scan skips them, and
// the parent holds them no longer: 18 MiB under maxDiskMb 8 unseen.
func TestDiskForkInheritedOldFiles(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	sid := d.open(`{"limits":{"maxDiskMb":8}}`)
	r := d.srun(sid, `import mmap, os, time
global held
held = []
for i in range(3):
    fd = os.open("h%d" % i, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 6 << 20)
    held.append(mmap.mmap(fd, 6 << 20))
    os.close(fd)
    os.unlink("h%d" % i)
time.sleep(2.5)
return len(held)`, `"limits":{"maxWallMs":60000}`)
	if r.Error != nil {
		t.Fatalf("opening: %+v", r.Error)
	}
	fork := d.fork(sid)
	if r := d.srun(sid, `import os
global held
for m in held:
    m.close()
held = []
return 0`); r.Error != nil {
		t.Fatalf("closing in the parent: %+v", r.Error)
	}
	r = d.srun(fork, `import os, time
for m in held:
    m[:] = b"x" * (6 << 20)
time.sleep(15)
return "unseen"`, `"limits":{"maxWallMs":60000}`)
	if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
		t.Errorf("18 MiB written by a fork into files born before it, under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", r.Value, r.Error)
	}
}

// TestDiskForkSparseCopy: a session under maxDiskMb 8 holds seven sparse
// files of 8 MiB each (no blocks: under its budget); a fork copies files
// dense, so session/fork would make the daemon write 56 MiB, seven times
// the budget, for every fork. The copy is bounded by the budget: the fork
// is refused.
func TestDiskForkSparseCopy(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	sid := d.open(`{"limits":{"maxDiskMb":8}}`)
	if r := d.srun(sid, `import os
for i in range(7):
    with open("sparse%d" % i, "wb") as f:
        f.truncate(8 << 20)
return 7`); r.Error != nil {
		t.Fatalf("making sparse files: %+v", r.Error)
	}
	m := d.call("session/fork", `{"sessionId":"`+sid+`"}`)
	if m.Error == nil {
		t.Errorf("a fork copying 56 MiB of sparse files under maxDiskMb 8 was made: %s", m.raw)
	}
}
