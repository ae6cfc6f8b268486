package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// The disk budget (docs/protocol.md §7, limits.maxDiskMb): a run's or a
// session's directory may not hold more than its budget for longer than a
// sampling period or two, so that one client cannot fill the daemon's
// temporary directory and make everyone else's staging fail.

// smallTmpfs mounts a 64 MiB tmpfs (the daemon's TMPDIR in these tests) and
// unmounts it when the test ends; it skips, saying why, where the test
// cannot mount one (not root, no mount permission in this container).
func smallTmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the test's tmpfs: %v", err)
		}
	})
	return dir
}

// fillDisk writes 1 MiB files into the working directory until writes fail
// `tries` times, then returns how many it wrote.
const fillDisk = `import os
i = fails = 0
while fails < %d:
    try:
        with open("fill%%d" %% i, "wb") as f:
            f.write(b"x" * (1 << 20))
        i += 1
    except OSError:
        fails += 1
return i`

// oneMiBFile is a run's `files` entry of 1 MiB.
func oneMiBFile() string {
	return `"files":[{"path":"in.bin","base64":"` + base64.StdEncoding.EncodeToString(make([]byte, 1<<20)) + `"}]`
}

// TestDiskC761RunBudget: a run that keeps writing past its 8 MiB budget on a
// 64 MiB TMPDIR ends output-limit naming the budget (not by its wall clock),
// and the next run stages a 1 MiB file and runs.
func TestDiskC761RunBudget(t *testing.T) {
	leakcheck.Check(t)
	tmp := smallTmpfs(t)
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_MAX_DISK_MB": "8"})
	r := d.run(prog(fmt.Sprintf(fillDisk, 1000000), `"limits":{"maxWallMs":20000}`))
	if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
		t.Errorf("a run writing past its budget: %+v, want output-limit naming maxDiskMb=8", r.Error)
	}
	expectOK(t, d.run(prog("return len(open('in.bin','rb').read())", oneMiBFile())), "1048576")
}

// TestDiskC762SessionBudget: a session (opened with limits.maxDiskMb 8) that
// fills the 64 MiB TMPDIR is lost naming the budget, whether the sampler
// catches its run in the act or between runs, and its directory goes with
// it: a fresh run then stages a 1 MiB file and runs. A run's own
// maxDiskMb above the daemon's is refused like any limit.
func TestDiskC762SessionBudget(t *testing.T) {
	leakcheck.Check(t)
	tmp := smallTmpfs(t)
	d := started(t, map[string]string{"TMPDIR": tmp, "CODERUN_MAX_DISK_MB": "32"})
	if m := d.call("run", prog("return 1", `"limits":{"maxDiskMb":33}`)); m.Error == nil ||
		!strings.Contains(m.Error.Message, "limits.maxDiskMb must not exceed the daemon's configured 32") {
		t.Errorf("maxDiskMb above the daemon's: %s", m.raw)
	}
	sid := d.open(`{"limits":{"maxDiskMb":8}}`)
	r := d.srun(sid, fmt.Sprintf(fillDisk, 3))
	if r.Error != nil && (r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8")) {
		t.Errorf("the filling run: %+v, want a value or output-limit naming maxDiskMb=8", r.Error)
	}
	if reason, msg := d.closedNote(sid, 30*time.Second); reason != "lost" || !strings.Contains(msg, "maxDiskMb=8") {
		t.Errorf("session/closed %q %q, want lost naming maxDiskMb=8", reason, msg)
	}
	expectOK(t, d.run(prog("return len(open('in.bin','rb').read())", oneMiBFile())), "1048576")
}

// TestDiskC765UnlinkedFile: each file is held to the disk budget by
// RLIMIT_FSIZE too (the bound of a file the daemon cannot see, C767's
// residuals): writing 9 MiB into an unlinked file against maxDiskMb 8 fails
// with EFBIG at 8 MiB (Python ignores SIGXFSZ) and the run goes on — unless
// the measurement, which counts the unlinked file (C767), finds its 8 MiB
// and their metadata first and ends the run output-limit. Never "written".
func TestDiskC765UnlinkedFile(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	r := d.run(prog(`import errno, os
f = open("hidden", "wb")
os.unlink("hidden")
try:
    f.write(b"x" * (9 << 20))
    f.flush()
except OSError as e:
    return errno.errorcode[e.errno]
return "written"`, `"limits":{"maxDiskMb":8}`))
	if r.Error != nil && r.Error.Kind == "output-limit" && strings.Contains(r.Error.Message, "maxDiskMb=8") {
		return
	}
	expectOK(t, r, `"EFBIG"`)
}

// TestDiskC766SessionBetweenRuns: a session run whose own budget (8 MiB)
// is wider than the session's (4 MiB) leaves 6 MiB behind and returns; with
// no request under way the session is found over its own budget and lost:
// session/closed lost naming it, and its id is then −32004 lost. (A thread
// left writing cannot be the cause: an idle session is frozen.)
func TestDiskC766SessionBetweenRuns(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, nil)
	sid := d.open(`{"limits":{"maxDiskMb":4}}`)
	r := d.srun(sid, `for i in range(6):
    with open("kept%d" % i, "wb") as f:
        f.write(b"x" * (1 << 20))
return "written"`, `"limits":{"maxDiskMb":8}`)
	if string(r.Value) != `"written"` || !r.Session.Alive {
		t.Fatalf("the run that writes 6 MiB: %s %+v %+v", r.Value, r.Error, r.Session)
	}
	if reason, msg := d.closedNote(sid, 30*time.Second); reason != "lost" || !strings.Contains(msg, "disk budget reached (maxDiskMb=4)") {
		t.Errorf("session/closed %q %q, want lost naming maxDiskMb=4", reason, msg)
	}
	expectSessionErr(t, d.call("run", prog("return 1", `"sessionId":"`+sid+`"`)), -32004, "lost", "")
}

// hideFiles keeps n files of 6 MiB each that no directory lists: "open"
// keeps each open after unlinking it, "mmap" maps each whole, closes it and
// unlinks it (the mapping alone then holds its blocks). Each file is under
// the 8 MiB budget (and RLIMIT_FSIZE); together they are over it. The
// program then waits for the daemon to notice.
const hideFiles = `import mmap, os, time
kept = []
for i in range(%d):
    name = "hidden%%d" %% i
    f = open(name, "w+b")
    f.write(b"x" * (6 << 20))
    f.flush()
    os.unlink(name)
    if %q == "mmap":
        kept.append(mmap.mmap(f.fileno(), 0))
        f.close()
    else:
        kept.append(f)
time.sleep(15)
return "unseen"`

// TestDiskC767HiddenFiles: files a program holds but no directory lists —
// unlinked while open, or mapped, closed and unlinked — count against the
// disk budget like listed ones: three of 6 MiB under maxDiskMb 8 end the
// run output-limit naming the budget, not by its wall clock.
func TestDiskC767HiddenFiles(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	for _, how := range []string{"open", "mmap"} {
		r := d.run(prog(fmt.Sprintf(hideFiles, 3, how), `"limits":{"maxDiskMb":8,"maxWallMs":60000}`))
		if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
			t.Errorf("%s: 18 MiB held unlisted under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", how, r.Value, r.Error)
		}
	}
}

// TestDiskC768SessionHiddenFiles: a session whose run leaves a thread
// holding unlisted files past the session's budget is lost naming it.
func TestDiskC768SessionHiddenFiles(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	sid := d.open(`{"limits":{"maxDiskMb":8}}`)
	r := d.srun(sid, fmt.Sprintf(hideFiles, 3, "mmap"), `"limits":{"maxWallMs":60000}`)
	if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
		t.Errorf("18 MiB mapped unlisted in a session under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", r.Value, r.Error)
	}
	if reason, msg := d.closedNote(sid, 30*time.Second); reason != "lost" || !strings.Contains(msg, "maxDiskMb=8") {
		t.Errorf("session/closed %q %q, want lost naming maxDiskMb=8", reason, msg)
	}
}

// threadHides has a thread keep three unlinked files of 6 MiB open (under
// the 8 MiB budget each, over it together) where /proc/<pid>/fd does not
// show them: "unshare" gives the thread a descriptor table of its own
// (unshare(CLONE_FILES)); "exit" ends the first thread alone (SYS_exit, not
// exit_group), after which /proc/<pid> shows no descriptors and no
// mappings while the process lives on in the other thread.
const threadHides = `import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
ready = threading.Event()
def hold():
    if %[1]q == "unshare" and libc.unshare(0x400) != 0:  # CLONE_FILES
        raise OSError(ctypes.get_errno(), "unshare")
    kept = []
    for i in range(3):
        f = open("hidden%%d" %% i, "w+b")
        f.write(b"x" * (6 << 20))
        f.flush()
        os.unlink(f.name)
        kept.append(f)
    ready.set()
    time.sleep(15)
t = threading.Thread(target=hold)
t.start()
ready.wait()
if %[1]q == "exit":
    libc.syscall(60, 0)  # SYS_exit on amd64: this thread only
t.join()
return "unseen"`

// TestDiskC770ThreadHeldFiles: unlinked files a thread holds count against
// the disk budget when the thread has a descriptor table of its own and
// when the process's first thread has ended: 18 MiB under maxDiskMb 8 end
// the run output-limit naming the budget, not by the program's own end.
func TestDiskC770ThreadHeldFiles(t *testing.T) {
	leakcheck.Check(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the program calls SYS_exit by its amd64 number")
	}
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	for _, how := range []string{"unshare", "exit"} {
		r := d.run(prog(fmt.Sprintf(threadHides, how), `"limits":{"maxDiskMb":8,"maxWallMs":60000}`))
		if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
			t.Errorf("%s: 18 MiB held by a thread under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", how, r.Value, r.Error)
		}
	}
}

// stagedHides makes the two files the daemon staged into the working
// directory (bootstrap.py and protocol.py, written when the warm child was
// prepared, long before the run when the child waited in the pool) hold 6
// MiB each, unlinked while open: files made before the run's watch began.
// It reports "young" without doing so when the directory is too recent for
// the trick (the pool's child was prepared less than 1.5 s ago).
const stagedHides = `import os, time
if time.time() - os.stat("bootstrap.py").st_ctime < 1.5:
    return "young"
kept = []
for name in ("bootstrap.py", "protocol.py"):
    f = open(name, "r+b")
    os.unlink(name)
    for _ in range(6):
        f.write(b"x" * (1 << 20))
    f.flush()
    kept.append(f)
time.sleep(15)
return "unseen"`

// TestDiskC771StagedFiles: the files the daemon staged for a warm child
// count when the program unlinks them and keeps them open, however long
// the child waited in the pool: 12 MiB in them under maxDiskMb 8 end the
// run output-limit naming the budget. The test waits, between tries, for a
// pool child prepared at least 1.5 s before its run.
func TestDiskC771StagedFiles(t *testing.T) {
	leakcheck.Check(t)
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	for try := 0; ; try++ {
		r := d.run(prog(stagedHides, `"limits":{"maxDiskMb":8,"maxWallMs":60000}`))
		if string(r.Value) == `"young"` && try < 20 {
			time.Sleep(time.Second) // the pool prepares the next child meanwhile
			continue
		}
		if r.Error == nil || r.Error.Kind != "output-limit" || !strings.Contains(r.Error.Message, "maxDiskMb=8") {
			t.Errorf("12 MiB in the staged files under maxDiskMb 8: %s %+v, want output-limit naming maxDiskMb=8", r.Value, r.Error)
		}
		return
	}
}

// TestDiskC772FallocateKeepSize: in tier sandbox no file holds more blocks
// than RLIMIT_FSIZE (the disk budget), which the kernel does not check for
// fallocate(FALLOC_FL_KEEP_SIZE): blocks past the end of a file. Such a
// fallocate of 16 MiB under maxDiskMb 8 is refused EOPNOTSUPP (what a file
// system without it answers); a plain one past RLIMIT_FSIZE fails EFBIG.
// (The file is emptied at once, before the budget's walk would end the run.)
func TestDiskC772FallocateKeepSize(t *testing.T) {
	leakcheck.Check(t)
	onlyInTier(t, "sandbox")
	d := started(t, map[string]string{"CODERUN_MAX_DISK_MB": "64"})
	r := d.run(prog(`import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
out = []
with open("big", "w+b") as f:
    for mode in (1, 0):  # FALLOC_FL_KEEP_SIZE, plain
        rc = libc.fallocate(f.fileno(), mode, 0, 16 << 20)
        held = os.fstat(f.fileno()).st_blocks * 512
        f.truncate(0)
        out.append(errno.errorcode[ctypes.get_errno()] if rc else "held %d MiB" % (held >> 20))
return out`, `"limits":{"maxDiskMb":8}`))
	expectOK(t, r, `["ENOTSUP","EFBIG"]`) // Python names EOPNOTSUPP (95) ENOTSUP
}
