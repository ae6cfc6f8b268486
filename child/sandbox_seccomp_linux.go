//go:build linux

package child

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A small seccomp filter closes what namespaces and Landlock leave open to
// the program:
//
//   - socket(AF_UNIX, …) → EACCES. Connecting to an existing pathname unix
//     socket is not a Landlock right before LANDLOCK_ACCESS_FS_RESOLVE_UNIX,
//     and the network namespace does not isolate the filesystem, so a host
//     socket (a container runtime's, a database's) would otherwise be
//     reachable. socketpair(2) stays allowed (asyncio's self-pipe,
//     multiprocessing pipes), as do inherited sockets (fd 3).
//   - io_uring_setup → ENOSYS: io_uring operations (IORING_OP_SOCKET …) are
//     not seen by seccomp.
//   - any other architecture or ABI (x32, int 0x80 on amd64) → ENOSYS, so
//     the filter cannot be sidestepped through another system call table.
//
// seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits on a
// little-endian machine; only little-endian architectures are listed).

var seccompArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
	"loong64": unix.AUDIT_ARCH_LOONGARCH64,
	"ppc64le": unix.AUDIT_ARCH_PPC64LE,
}

func seccompFilter() ([]unix.SockFilter, error) {
	arch, ok := seccompArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for GOARCH %s", runtime.GOARCH)
	}
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		x32   = 0x40000000 // __X32_SYSCALL_BIT
		allow = 8          // instruction indexes of the three returns
		eacc  = 9
		nosys = 10
	)
	f := []unix.SockFilter{
		0:  {Code: ld, K: 4},                           // arch
		1:  {Code: jeq, K: arch, Jt: 0, Jf: nosys - 2}, // other ABI → ENOSYS
		2:  {Code: ld, K: 0},                           // nr
		3:  {Code: jge, K: x32, Jt: nosys - 4, Jf: 0},  // x32 → ENOSYS
		4:  {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: nosys - 5, Jf: 0},
		5:  {Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: allow - 6},
		6:  {Code: ld, K: 16}, // args[0], low half
		7:  {Code: jeq, K: unix.AF_UNIX, Jt: eacc - 8, Jf: allow - 8},
		8:  {Code: ret, K: unix.SECCOMP_RET_ALLOW},
		9:  {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		10: {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
	return f, nil
}

// seccompInstall installs the filter on the calling thread (which then
// execs). no_new_privs must be set.
func seccompInstall() error {
	f, err := seccompFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	runtime.KeepAlive(f)
	return nil
}

func seccompFeature() Feature {
	f := Feature{Name: "seccomp filters"}
	if _, err := seccompFilter(); err != nil {
		f.Detail = err.Error()
		return f
	}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		f.Detail = "prctl(PR_GET_SECCOMP): " + err.Error()
		return f
	}
	f.OK, f.Detail = true, "socket(AF_UNIX) and io_uring denied to the program"
	return f
}
