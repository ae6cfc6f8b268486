package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// C20: there is no Windows build.
func TestNoWindowsBuild(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "build", "-o", os.DevNull, "github.com/coderun-rpc/coderun-rpc/cmd/coderun-rpc")
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "build constraints exclude all Go files") {
		t.Errorf("GOOS=windows build: %v\n%s", err, out)
	}
}

// C25: each run has its own staged directory (cwd, TMPDIR), removed before
// the response. Its path says nothing of the host (C764): it is
// <TMPDIR>/coderun-<random>/coderun-<random>, without the daemon's pid,
// whichever tier (the program sees the real path in both).
func TestRunDirectory(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	d := started(t, map[string]string{"TMPDIR": tmp})
	program := prog(`import os, sys
f = sys.modules["__main__"].__file__
return {"file": f, "cwd": os.getcwd(), "tmpdir": os.environ.get("TMPDIR")}`)
	var dirs []string
	for i := 0; i < 2; i++ {
		r := d.run(program)
		if r.Error != nil {
			t.Fatalf("%+v", *r.Error)
		}
		var v struct{ File, Cwd, Tmpdir string }
		json.Unmarshal(r.Value, &v)
		dir := filepath.Dir(v.File)
		realTmp, _ := filepath.EvalSymlinks(tmp)
		daemonDir := filepath.Dir(dir)
		if filepath.Base(v.File) != "bootstrap.py" || !opaqueDir.MatchString(filepath.Base(dir)) ||
			!opaqueDir.MatchString(filepath.Base(daemonDir)) ||
			filepath.Dir(daemonDir) != realTmp && filepath.Dir(daemonDir) != tmp || v.Cwd != dir || v.Tmpdir != dir {
			t.Errorf("run %d: %+v, want %s/coderun-<random>/coderun-<random>", i, v, tmp)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still exists after the response; daemon stderr:\n%s", dir, d.stderr)
		}
		dirs = append(dirs, dir)
	}
	if dirs[0] == dirs[1] {
		t.Error("two runs shared a directory")
	}
}

// opaqueDir is the name of a directory the daemon makes: coderun- and 26
// random base32 characters.
var opaqueDir = regexp.MustCompile(`^coderun-[a-z2-7]{26}$`)

// C28: a staging failure is a result, not a crash, and its message names
// "the daemon's temporary directory", never its path.
func TestStagingFailure(t *testing.T) {
	onlyInTier(t, "process") // tier sandbox refuses to start where its probe cannot stage a directory
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	d := started(t, map[string]string{"TMPDIR": file, "CODERUN_WARM_POOL": "0"})
	r := d.run(prog("return 1"))
	if r.Error == nil || r.Error.Kind != "worker-exit" || !strings.HasPrefix(r.Error.Message, "failed to stage the python bootstrap in the daemon's temporary directory: ") ||
		strings.Contains(r.Error.Message, file) || len(r.Logs) != 0 || r.Value != nil {
		t.Errorf("%+v %q %s", r.Error, r.Logs, r.Value)
	}
	if m := d.call("initialize", ""); m.Error == nil || m.Error.Code != -32600 { // still serving
		t.Errorf("after a staging failure: %s", m.raw)
	}
}

// C18: a forged second boot-ack does not resend run.
func TestForgedBootAck(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	expectOK(t, d.run(prog("import os\nos.write(3, b'{\"type\":\"boot-ack\"}\\n')\nreturn \"done\"")), `"done"`)
}
