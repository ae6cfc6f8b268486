//go:build linux

package sandbox

import (
	"bufio"
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

// A root daemon also puts each run in a memory cgroup when one can be had
// (v1 "memory" hierarchy, or v2 with the memory controller available in the
// daemon's cgroup): its limit counts what RLIMIT_AS does not — shared memory
// (the run's /dev/shm), kernel memory, and all the run's processes together.
// The limit is the run's address-space budget, which the child sets at boot
// as RLIMIT_AS, after a warm sandbox started: so the init sets it, through
// descriptors of the limit files (cpu_linux.go, watchRun). Without a memory
// cgroup, memfd and SysV shared memory are refused (seccomp) and /dev/shm
// is a bounded tmpfs either way.

// pidsCgroupBase and memoryCgroupBase are where per-run cgroups of each
// controller are created.
var (
	pidsCgroupBase   = sync.OnceValues(func() (string, error) { return findCgroup("pids") })
	memoryCgroupBase = sync.OnceValues(func() (string, error) { return findCgroup("memory") })
)

// findCgroup locates the daemon's own cgroup in a hierarchy where ctrl
// ("pids", "memory") can be used by children, and checks that it can create
// one.
func findCgroup(ctrl string) (string, error) {
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
			if m, ok := mounts[ctrl]; ok && c == ctrl {
				base := filepath.Join(m.dir, relCgroup(m.root, parts[2]))
				return base, tryCgroup(base, ctrl)
			}
		}
	}
	if m, ok := mounts[""]; ok && v2 != "" {
		base := filepath.Join(m.dir, relCgroup(m.root, v2))
		if err := enableController(base, ctrl); err != nil {
			return "", err
		}
		return base, tryCgroup(base, ctrl)
	}
	return "", fmt.Errorf("no %s cgroup hierarchy is mounted", ctrl)
}

// enableController makes ctrl available to the children of the v2 cgroup
// base.
func enableController(base, ctrl string) error {
	ctl, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if strings.Contains(" "+strings.TrimSpace(string(ctl))+" ", " "+ctrl+" ") {
		return nil
	}
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+"+ctrl), 0); err != nil {
		return fmt.Errorf("enabling the %s controller in %s: %w", ctrl, base, err)
	}
	return nil
}

type cgroupMount struct{ dir, root string }

// cgroupMounts maps each v1 controller ("pids", "memory" …) to its
// hierarchy and "" to the cgroup2 mount, from /proc/self/mountinfo.
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
				if _, seen := out[o]; !seen && o != "" {
					out[o] = m
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
// cgroup with ctrl's files.
func tryCgroup(base, ctrl string) error {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "coderun-") {
			continue
		}
		if st, err := e.Info(); err == nil && st.IsDir() && time.Since(st.ModTime()) > staleCgroupAge {
			unix.Rmdir(filepath.Join(base, e.Name()))
		}
	}
	dir, err := mkRunCgroup(base)
	if err != nil {
		return err
	}
	defer removeCgroup(dir)
	for _, f := range controllerFiles[ctrl] {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s: no %s controller files", base, ctrl)
}

// controllerFiles are the limit files of a controller (v2 name first): the
// pids bound, and the memory limits, written in this order.
var controllerFiles = map[string][]string{
	"pids":   {"pids.max"},
	"memory": {"memory.max", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"},
}

// mkRunCgroup creates a run cgroup under base with a random name: the
// program can read its cgroup's path in /proc/self/cgroup (there is no
// cgroup namespace), so the name says nothing about the daemon (no host
// pid, no count of runs).
func mkRunCgroup(base string) (string, error) {
	var id [8]byte
	// getrandom(2) itself: crypto/rand's package initialisation would run
	// at every start of the init's binary, which links this package.
	if _, err := unix.Getrandom(id[:], 0); err != nil {
		return "", fmt.Errorf("naming a cgroup: %w", err)
	}
	dir := filepath.Join(base, "coderun-"+hex.EncodeToString(id[:]))
	return dir, os.Mkdir(dir, 0o700)
}

// runCgroup is one run's cgroups: one directory per hierarchy (v1 pids and
// memory are two, v2 one for both).
type runCgroup struct {
	dirs []string
	// procs are the directories' cgroup.procs opened for writing (the
	// program's process writes "0" to each to join); memLimits the memory
	// limit files, for the init (none without a memory cgroup).
	procs, memLimits []*os.File
}

// newRunCgroup creates the run's pids cgroup (pids.max = maxProcs) and, when
// memory has a base, its memory cgroup (no limit yet, no swap).
func newRunCgroup(pidsBase, memBase string, maxProcs int) (cg *runCgroup, err error) {
	cg = &runCgroup{}
	defer func() {
		if err != nil {
			cg.closeFiles()
			cg.remove()
		}
	}()
	pids, err := cg.add(pidsBase)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pids, "pids.max"), []byte(strconv.Itoa(maxProcs)), 0); err != nil {
		return nil, err
	}
	if memBase == "" {
		return cg, nil
	}
	mem := pids
	if memBase != pidsBase {
		if mem, err = cg.add(memBase); err != nil {
			return nil, err
		}
	}
	os.WriteFile(filepath.Join(mem, "memory.swap.max"), []byte("0"), 0) // v2 with swap
	for _, name := range controllerFiles["memory"] {
		f, err := os.OpenFile(filepath.Join(mem, name), os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cg.memLimits = append(cg.memLimits, f)
		if name == "memory.max" {
			break // v2: the v1 names are absent anyway
		}
	}
	return cg, nil
}

// add creates a run cgroup under base and opens its cgroup.procs.
func (cg *runCgroup) add(base string) (string, error) {
	dir, err := mkRunCgroup(base)
	if err != nil {
		return "", err
	}
	cg.dirs = append(cg.dirs, dir)
	procs, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	cg.procs = append(cg.procs, procs)
	return dir, nil
}

// open are the open files, in the order the init gets them: the procs
// files, then the memory limits.
func (cg *runCgroup) open() []*os.File {
	return append(append([]*os.File{}, cg.procs...), cg.memLimits...)
}

// files are the descriptors of open.
func (cg *runCgroup) files() []uintptr {
	var fds []uintptr
	for _, f := range cg.open() {
		fds = append(fds, f.Fd())
	}
	return fds
}

// closeFiles closes the descriptors once the init holds them.
func (cg *runCgroup) closeFiles() {
	if cg == nil {
		return
	}
	for _, f := range cg.open() {
		f.Close()
	}
}

// remove deletes the run's cgroups once their last task is gone.
func (cg *runCgroup) remove() error {
	if cg == nil {
		return nil
	}
	var errs []error
	for _, d := range cg.dirs {
		errs = append(errs, removeCgroup(d))
	}
	return errors.Join(errs...)
}

// removeCgroup deletes a cgroup once its last task is gone (a task that has
// just exited can keep it busy for a moment).
func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 100; i++ {
		if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &os.PathError{Op: "rmdir", Path: dir, Err: err}
}
