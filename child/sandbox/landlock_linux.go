//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock (Documentation/userspace-api/landlock.rst), through the raw system
// calls: the ruleset handles every filesystem right the running kernel's ABI
// knows, so anything not granted by a rule is denied. ABI 4 adds TCP bind and
// connect (handled: denied, on top of the empty network namespace, but for
// connecting to ProxyPort, where the daemon's egress proxy may listen); ABI 6 adds scoping (no abstract unix sockets or signals outside
// the domain, so the program cannot signal its init).

// landlockABI returns the kernel's Landlock ABI version, or an error when
// Landlock is not built in or not enabled at boot.
func landlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, e
	}
	if int(v) < 1 {
		return 0, fmt.Errorf("ABI version %d", int(v))
	}
	return int(v), nil
}

const (
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// llRead has no EXECUTE: a read-only tree (the system library
	// directories among them) holds binaries the program must not run.
	// Shared objects need only READ_FILE: the dynamic loader opens them for
	// reading and maps them, and Landlock checks EXECUTE only on the opens
	// of execve (__FMODE_EXEC), of the binary and of its PT_INTERP.
	llRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// llExec is for the few files execve must open (see execRules).
	llExec = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_EXECUTE
	// llReadWrite is every right but EXECUTE (the run directory, /dev/shm):
	// nothing the program writes can be executed.
	llReadWrite = math.MaxUint64 &^ uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE)
	llDevice    = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// llHandledFS is every filesystem right of the given ABI.
func llHandledFS(abi int) uint64 {
	fs := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return fs
}

// llRulesetAttr is struct landlock_ruleset_attr up to ABI 6 (the kernel
// accepts a shorter struct and zero-fills the rest).
type llRulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// llRule is a path the domain grants access to.
type llRule struct {
	path   string
	access uint64
	must   bool // a missing path is an error (otherwise it is skipped)
}

// landlockRestrict builds a ruleset from rules and restricts the calling
// thread (and what it execs) with it. The caller has set no_new_privs and is
// locked to its OS thread.
func landlockRestrict(rules []llRule) error {
	rfd, err := landlockRuleset(rules)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rfd), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// landlockRuleset builds a ruleset from rules and returns its descriptor
// (close-on-exec): landlock_restrict_self on it confines whichever process
// holds it, this one or one it is passed to.
func landlockRuleset(rules []llRule) (int, error) {
	abi, err := landlockABI()
	if err != nil {
		return -1, fmt.Errorf("landlock: %w", err)
	}
	handled := llHandledFS(abi)
	attr := llRulesetAttr{handledFS: handled}
	size := unsafe.Sizeof(attr.handledFS)
	if abi >= 4 {
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size += unsafe.Sizeof(attr.handledNet)
	}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
		size += unsafe.Sizeof(attr.scoped)
	}
	rfd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	for _, r := range rules {
		if err := llAddPath(int(rfd), r, handled); err != nil {
			unix.Close(int(rfd))
			return -1, err
		}
	}
	if abi >= 4 {
		if err := llAllowProxyConnect(int(rfd)); err != nil {
			unix.Close(int(rfd))
			return -1, err
		}
	}
	return int(rfd), nil
}

func llAddPath(rulesetFd int, r llRule, handled uint64) error {
	fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if !r.must && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "landlock rule", Path: r.path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "landlock rule", Path: r.path, Err: err}
	}
	access := r.access & handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights // directory rights on a file are EINVAL
	}
	if access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); e != 0 {
		return &os.PathError{Op: "landlock_add_rule", Path: r.path, Err: e}
	}
	return nil
}
