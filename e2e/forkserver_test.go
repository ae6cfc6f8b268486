package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// The fork server (CODERUN_START_MODE fork, the default) is one process and
// one directory per daemon, alive as long as the daemon: neither is a run's.
// Its forked children keep the server's command line and original
// environment in /proc (exec never happened), so a server is told from its
// children by its parent: a child's parent is a server.

// isForkServer reports whether pid runs forkserver.py and its parent does not.
func isForkServer(pid int) bool {
	return runsForkServer(pid) && !runsForkServer(ppid(pid))
}

func runsForkServer(pid int) bool {
	cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0})
	if err != nil || len(args) == 0 {
		return false
	}
	if n := len(args); n > 2 && bytes.Equal(args[n-2], []byte("--preload")) { // CODERUN_PRELOAD
		args = args[:n-2]
	}
	if bytes.Equal(args[len(args)-1], []byte("--sandbox")) { // tier sandbox's server
		args = args[:len(args)-1]
	}
	return bytes.HasSuffix(args[len(args)-1], []byte("/forkserver.py"))
}

// isForkServerDir reports whether tmp/name is the fork server's staged
// directory, or the daemon's matplotlib directory (docs/containment.md §4.5),
// which lives as long as the daemon too.
func isForkServerDir(tmp, name string) bool {
	_, err := os.Stat(filepath.Join(tmp, name, "forkserver.py"))
	_, mpl := os.Stat(filepath.Join(tmp, name, "matplotlibrc"))
	return err == nil || mpl == nil
}
