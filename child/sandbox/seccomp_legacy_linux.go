//go:build linux && (amd64 || ppc64le)

package sandbox

import "golang.org/x/sys/unix"

// legacySyscalls: the old forms this architecture keeps besides those in
// epermSyscalls, denied with them.
var legacySyscalls = []uint32{
	unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT,
	unix.SYS_INOTIFY_INIT,
}
