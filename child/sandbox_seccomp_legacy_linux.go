//go:build linux && (amd64 || ppc64le)

package child

import "golang.org/x/sys/unix"

// legacyMetadataSyscalls: the path-only forms this architecture keeps
// besides the *at ones (see metadataSyscalls).
var legacyMetadataSyscalls = []uint32{
	unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT,
}
