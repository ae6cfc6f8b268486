//go:build linux

package sandbox

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// The sandboxed program may execve its own interpreter (and, necessarily,
// its dynamic loader: see execRules) and nothing else: not a system binary
// in the read-only trees, not an ELF it writes itself.

// execScript runs argv and prints "ran" (any exit code) or the name of the
// OSError subprocess raised. With a source path first, it copies that file
// to argv[0] (created 0755 by os.open: no chmod, which seccomp may deny).
const execScript = `import os, subprocess, sys
src, argv = sys.argv[1], sys.argv[2:]
if src:
    with open(src, "rb") as f:
        data = f.read()
    fd = os.open(argv[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)
try:
    r = subprocess.run(argv, capture_output=True, timeout=10)
    print("ran", r.returncode, r.stdout[:200], r.stderr[:200])
except OSError as e:
    print(e.__class__.__name__, e)
`

// sandboxedExec runs execScript in the sandbox and returns its first word.
func sandboxedExec(t *testing.T, sb *Config, src string, argv ...string) string {
	t.Helper()
	r := runPython(t, sb, execScript, append([]string{src}, argv...)...)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}
	t.Logf("%v: %s", argv, strings.TrimSpace(r.stdout))
	word, _, _ := strings.Cut(r.stdout, " ")
	return word
}

// systemBinaryIn returns an executable ELF of a Debian-like system that
// lies in one of the read-only trees (so only the missing EXECUTE right
// stops it), or "".
func systemBinaryIn(ro []string) string {
	for _, p := range []string{"/usr/lib/git-core/git", "/usr/lib/apt/apt-helper",
		"/usr/lib/systemd/systemd-ac-power", "/usr/lib/openssh/ssh-keysign"} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if st, err := os.Stat(real); err != nil || st.Mode()&0o111 == 0 {
			continue
		}
		for _, tree := range ro {
			if rel, err := filepath.Rel(tree, real); err == nil && !strings.HasPrefix(rel, "..") {
				return real
			}
		}
	}
	return ""
}

// testLoader is the interpreter's PT_INTERP (the dynamic loader), an ELF
// any glibc system can run standalone (`ld.so --version`) and that the
// sandbox can read.
func testLoader(t *testing.T) string {
	exe, _ := testPython(t)
	f, err := elf.Open(exe)
	if err != nil {
		t.Skipf("interpreter %s is not an ELF: %v", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return strings.TrimRight(string(b), "\x00")
			}
		}
	}
	t.Skipf("interpreter %s has no PT_INTERP", exe)
	return ""
}

// TestElfInterp: the rule for the loader lands on the file the kernel opens.
func TestElfInterp(t *testing.T) {
	exe, _ := testPython(t)
	if got, want := elfInterp(exe), testLoader(t); got != want {
		t.Errorf("elfInterp(%s) = %q, want %q", exe, got, want)
	}
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if got := elfInterp(script); got != "" {
		t.Errorf("elfInterp(a script) = %q, want \"\"", got)
	}
	for _, c := range []struct {
		class64 bool
		bo      binary.ByteOrder
	}{{true, binary.LittleEndian}, {true, binary.BigEndian}, {false, binary.LittleEndian}, {false, binary.BigEndian}} {
		if got := interpOf(bytes.NewReader(tinyELF(c.class64, c.bo, "/l/ld.so"))); got != "/l/ld.so" {
			t.Errorf("interpOf(ELF 64-bit %v, %v) = %q, want /l/ld.so", c.class64, c.bo, got)
		}
	}
}

// tinyELF is an ELF file of one class and byte order with a single program
// header, PT_INTERP, naming interp.
func tinyELF(class64 bool, bo binary.ByteOrder, interp string) []byte {
	h := make([]byte, 52, 256)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 1, 1, 1
	if bo == binary.ByteOrder(binary.BigEndian) {
		h[5] = 2
	}
	if class64 {
		h = h[:64]
		h[4] = 2
		bo.PutUint64(h[32:], 64) // e_phoff
		bo.PutUint16(h[54:], 56) // e_phentsize
		bo.PutUint16(h[56:], 1)  // e_phnum
		ph := make([]byte, 56)
		bo.PutUint32(ph, 3)                          // PT_INTERP
		bo.PutUint64(ph[8:], 64+56)                  // p_offset
		bo.PutUint64(ph[32:], uint64(len(interp)+1)) // p_filesz
		return append(append(h, ph...), interp+"\x00"...)
	}
	bo.PutUint32(h[28:], 52) // e_phoff
	bo.PutUint16(h[42:], 32) // e_phentsize
	bo.PutUint16(h[44:], 1)  // e_phnum
	ph := make([]byte, 32)
	bo.PutUint32(ph, 3)
	bo.PutUint32(ph[4:], 52+32)
	bo.PutUint32(ph[16:], uint32(len(interp)+1))
	return append(append(h, ph...), interp+"\x00"...)
}

// FuzzInterpOf: the small ELF reader finds what debug/elf finds in every
// file debug/elf parses, and never panics on the others.
func FuzzInterpOf(f *testing.F) {
	f.Add(tinyELF(true, binary.LittleEndian, "/lib64/ld-linux-x86-64.so.2"))
	f.Add(tinyELF(false, binary.BigEndian, "/lib/ld.so.1"))
	f.Add([]byte("#!/bin/sh\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := interpOf(bytes.NewReader(b))
		e, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return
		}
		want := ""
		for _, p := range e.Progs {
			if p.Type == elf.PT_INTERP {
				buf := make([]byte, min(p.Filesz, 4096))
				if _, err := p.ReadAt(buf, 0); err == nil {
					want, _, _ = strings.Cut(string(buf), "\x00")
				}
				break
			}
		}
		if got != want {
			t.Fatalf("interpOf = %q, debug/elf finds %q", got, want)
		}
	})
}

func TestSandboxExec(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)

	t.Run("system binary in a read-only tree", func(t *testing.T) {
		bin := systemBinaryIn(sb.ReadOnly)
		if bin == "" {
			t.Skip("none of git, apt-helper, systemd-ac-power, ssh-keysign under /usr/lib in the read-only trees")
		}
		if got := sandboxedExec(t, &sb, "", bin, "--version"); got != "PermissionError" {
			t.Errorf("exec %s: %s, want PermissionError", bin, got)
		}
	})
	for _, c := range []struct{ where, dst string }{
		{"the run directory", "./copied-elf"},
		{"the run's /dev/shm", "/dev/shm/copied-elf"},
	} {
		t.Run("ELF written to "+c.where, func(t *testing.T) {
			loader := testLoader(t)
			if got := sandboxedExec(t, &sb, loader, c.dst, "--version"); got != "PermissionError" {
				t.Errorf("exec a copy of %s at %s: %s, want PermissionError", loader, c.dst, got)
			}
		})
	}
	t.Run("the interpreter itself", func(t *testing.T) {
		r := runPython(t, &sb, `import subprocess, sys
print(subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True).stdout.decode().strip())`)
		if r.exit.Code != 0 || strings.TrimSpace(r.stdout) != "1" {
			t.Errorf("exit %+v, stdout %q, stderr %q, want 1", r.exit, r.stdout, r.stderr)
		}
	})
}

// TestSandboxInterpreterStillWorks: what CPython loads or starts by itself
// works without EXECUTE on the library trees: extension modules and
// ctypes (shared objects are opened for reading and mapped, not executed;
// callbacks need libffi closures, which memfd_create's refusal must leave),
// subprocess of sys.executable, multiprocessing by fork and by spawn.
func TestSandboxInterpreterStillWorks(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	const script = `import ctypes, glob, json, multiprocessing, os, sqlite3, ssl, subprocess, sys, time, _ctypes
def square(x):
    return x * x
out = {}
out["sqlite3"] = sqlite3.connect(":memory:").execute("select 41 + 1").fetchone()[0]
out["ssl"] = ssl.OPENSSL_VERSION.startswith("OpenSSL")
dynload = [p for p in glob.glob(os.path.join(os.path.dirname(_ctypes.__file__), "*.so")) if p != _ctypes.__file__]
out["ctypes-dynload"] = ctypes.CDLL(dynload[0])._name == dynload[0]
out["ctypes-libc"] = ctypes.CDLL(None).getpid() == os.getpid()
out["ctypes-callback"] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(41)
out["subprocess"] = subprocess.run([sys.executable, "-c", "print(7)"], capture_output=True, check=True).stdout.decode().strip()
with multiprocessing.get_context("fork").Pool(2) as p:
    out["fork"] = p.map(square, [1, 2, 3])
sp = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
sp.start()
sp.join()
out["spawn"] = sp.exitcode
print(json.dumps(out, sort_keys=True))
`
	r := runPython(t, &sb, script)
	if r.exit.Code != 0 {
		t.Fatalf("exit %+v, stdout %q, stderr %q", r.exit, r.stdout, r.stderr)
	}
	const want = `{"ctypes-callback": 42, "ctypes-dynload": true, "ctypes-libc": true, "fork": [1, 4, 9], "spawn": 0, "sqlite3": 42, "ssl": true, "subprocess": "7"}`
	if got := strings.TrimSpace(r.stdout); got != want {
		t.Errorf("got %s, want %s (stderr %q)", got, want, r.stderr)
	}
}

// TestInterpreterTrees: the interpreter reports its binary first and a tree
// holding its standard library; an interpreter that fails is an error.
func TestInterpreterTrees(t *testing.T) {
	exe, _ := testPython(t) // InterpreterTrees of python3, behind its shim
	trees, err := InterpreterTrees(exe)
	if err != nil || len(trees) == 0 {
		t.Fatalf("InterpreterTrees(%s) = %q, %v", exe, trees, err)
	}
	if st, err := os.Stat(trees[0]); trees[0] != exe || err != nil || !st.Mode().IsRegular() {
		t.Errorf("first tree %q, want the interpreter %q", trees[0], exe)
	}
	stdlib := false
	for _, tree := range trees {
		if !filepath.IsAbs(tree) {
			t.Errorf("tree %q is not absolute", tree)
		}
		_, err := os.Stat(filepath.Join(tree, "os.py"))
		stdlib = stdlib || err == nil
	}
	if !stdlib {
		t.Errorf("no tree holds os.py: %q", trees)
	}
	if trees, err := InterpreterTrees("/bin/false"); err == nil {
		t.Errorf("InterpreterTrees(/bin/false) = %q, want an error", trees)
	}
}

// TestSandboxExecSystemTools: with the system's executable trees granted, a
// program runs installed tools (a pipeline through sh, grep, git), and still
// cannot execute what it writes, neither a copy of a system binary nor a
// "#!" script.
func TestSandboxExecSystemTools(t *testing.T) {
	leakcheck.Check(t)
	sb := testSandbox(t)
	sb.Executable = SystemExecutableDirs()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	r := runPython(t, &sb, `import subprocess
print(subprocess.run(["sh", "-c", "printf 'a\nb\na\n' | grep -c a"], capture_output=True, check=True).stdout.decode().strip())`)
	if r.exit.Code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Errorf("sh | grep: exit %+v, stdout %q, stderr %q, want 2", r.exit, r.stdout, r.stderr)
	}
	if git, err := exec.LookPath("git"); err == nil {
		if got := sandboxedExec(t, &sb, "", git, "--version"); got != "ran" {
			t.Errorf("exec %s: %s, want ran", git, got)
		}
	}
	if got := sandboxedExec(t, &sb, sh, "./copied-sh", "-c", "true"); got != "PermissionError" {
		t.Errorf("exec a copy of %s in the run directory: %s, want PermissionError", sh, got)
	}
	r = runPython(t, &sb, `import os, subprocess
fd = os.open("script", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
os.write(fd, b"#!/bin/sh\necho ran\n")
os.close(fd)
try:
    subprocess.run(["./script"], check=True)
except OSError as e:
    print(type(e).__name__)`)
	if strings.TrimSpace(r.stdout) != "PermissionError" {
		t.Errorf("a written #! script: stdout %q, stderr %q, want PermissionError", r.stdout, r.stderr)
	}
}
