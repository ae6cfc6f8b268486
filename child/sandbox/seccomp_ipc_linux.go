//go:build linux && !ppc64le

package sandbox

// ipcSyscalls: none; this architecture has only the direct SysV IPC system
// calls.
var ipcSyscalls []uint32
