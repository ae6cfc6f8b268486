//go:build linux

package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The per-run process bound.
//
// RLIMIT_NPROC is checked at fork against the number of tasks of the caller's
// (user namespace, uid) — one counter per run, since every run has its own
// user namespace — but the kernel exempts tasks whose real uid is global
// root (copy_process: `p->real_cred->user != INIT_USER`). A daemon running as
// root maps the namespace's root to uid 0, so RLIMIT_NPROC bounds nothing
// there (verified on this project's CI kernel, see TestSandboxNprocRootExempt).
// A root daemon therefore uses a pids cgroup (v1 "pids" hierarchy, or v2
// with the pids controller enabled in the daemon's cgroup's
// subtree_control): one child cgroup per run with pids.max, which the
// program's process joins before exec. A non-root daemon uses RLIMIT_NPROC.

// pidsCgroupBase is where per-run pids cgroups are created ("" if none).
var pidsCgroupBase = sync.OnceValues(findPidsCgroup)

// findPidsCgroup locates the daemon's own cgroup in a hierarchy whose
// children get a pids.max file, and checks that it can create one.
func findPidsCgroup() (string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return "", err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "pids" {
				if m, ok := mounts["pids"]; ok {
					base := filepath.Join(m.dir, relCgroup(m.root, parts[2]))
					return base, tryCgroup(base)
				}
			}
		}
	}
	if m, ok := mounts[""]; ok && v2 != "" {
		base := filepath.Join(m.dir, relCgroup(m.root, v2))
		ctl, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
		if err != nil {
			return "", err
		}
		if !strings.Contains(" "+strings.TrimSpace(string(ctl))+" ", " pids ") {
			if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				return "", fmt.Errorf("enabling the pids controller in %s: %w", base, err)
			}
		}
		return base, tryCgroup(base)
	}
	return "", errors.New("no pids cgroup hierarchy is mounted")
}

type cgroupMount struct{ dir, root string }

// cgroupMounts maps "pids" to the v1 pids hierarchy and "" to the cgroup2
// mount, from /proc/self/mountinfo.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		m := cgroupMount{dir: unescapeMount(a[4]), root: unescapeMount(a[3])}
		switch b[0] {
		case "cgroup2":
			if _, seen := out[""]; !seen {
				out[""] = m
			}
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				if o == "pids" {
					if _, seen := out["pids"]; !seen {
						out["pids"] = m
					}
				}
			}
		}
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func relCgroup(root, path string) string {
	if root != "/" {
		if rel, ok := strings.CutPrefix(path, root); ok {
			return rel
		}
	}
	return path
}

// staleCgroupAge: a run cgroup is empty only between its creation and the
// program joining it, and between the program's end and its removal — a few
// milliseconds. One empty for this long was left by a daemon that died.
const staleCgroupAge = time.Minute

// tryCgroup removes the run cgroups dead daemons left under base (rmdir
// fails on a cgroup that still has tasks), then creates and removes a child
// cgroup with a pids.max.
func tryCgroup(base string) error {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "coderun-") {
			continue
		}
		if st, err := e.Info(); err == nil && st.IsDir() && time.Since(st.ModTime()) > staleCgroupAge {
			unix.Rmdir(filepath.Join(base, e.Name()))
		}
	}
	cg, err := newPidsCgroup(base, 1)
	if err != nil {
		return err
	}
	cg.procs.Close()
	return cg.remove()
}

// pidsCgroup is one run's cgroup; procs is its cgroup.procs opened for
// writing (the program's process writes "0" to it to join).
type pidsCgroup struct {
	dir   string
	procs *os.File
}

// newPidsCgroup creates a run cgroup under base with a random name: the
// program can read its cgroup's path in /proc/self/cgroup (there is no
// cgroup namespace), so the name says nothing about the daemon (no host
// pid, no count of runs).
func newPidsCgroup(base string, max int) (*pidsCgroup, error) {
	var id [8]byte
	rand.Read(id[:])
	dir := filepath.Join(base, "coderun-"+hex.EncodeToString(id[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	cg := &pidsCgroup{dir: dir}
	err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0)
	if err == nil {
		cg.procs, err = os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	}
	if err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// remove deletes the cgroup once its last task is gone (a task that has
// just exited can keep it busy for a moment).
func (cg *pidsCgroup) remove() error {
	if cg == nil {
		return nil
	}
	var err error
	for i := 0; i < 100; i++ {
		if err = unix.Rmdir(cg.dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &os.PathError{Op: "rmdir", Path: cg.dir, Err: err}
}
