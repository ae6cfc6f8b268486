//go:build linux && ppc64le

package sandbox

import "golang.org/x/sys/unix"

// ipcSyscalls: ppc64le still has the multiplexed SysV IPC entry (shmget
// among its operations) besides the direct system calls.
var ipcSyscalls = []uint32{unix.SYS_IPC}
