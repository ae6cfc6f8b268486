//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A small seccomp filter closes what namespaces and Landlock leave open to
// the program:
//
//   - socket() of any family but AF_INET, AF_INET6 and AF_NETLINK → EACCES.
//     Those three are confined by the network namespace; others are not:
//     AF_UNIX reaches host pathname sockets (connecting to one is not a
//     Landlock right before LANDLOCK_ACCESS_FS_RESOLVE_UNIX), AF_VSOCK
//     shares the machine's vsock space with the host and the hypervisor.
//   - socket() of AF_INET or AF_INET6 with a type other than SOCK_STREAM or
//     SOCK_DGRAM (SOCK_RAW …) → EACCES: the program holds CAP_NET_RAW in
//     its user namespace, and a raw socket in the network namespace a
//     session shares with its forks reads their loopback traffic to the
//     egress proxy, another member's proxy credentials included.
//   - socket() of AF_NETLINK with a protocol other than NETLINK_ROUTE
//     (interfaces and addresses: getifaddrs, getaddrinfo) or
//     NETLINK_USERSOCK → EACCES: with CAP_NET_ADMIN in the namespace,
//     NETLINK_NETFILTER would configure netfilter there (a packet-log
//     group copies the family's loopback traffic to the program), and
//     NETLINK_GENERIC reaches the drop monitor and other families.
//   - socketpair() of a type other than SOCK_STREAM or SOCK_SEQPACKET →
//     EACCES: an AF_UNIX datagram socket can sendto any pathname address.
//     Connected stream pairs stay allowed (asyncio's self-pipe,
//     multiprocessing), as do inherited sockets (fd 3).
//   - changes of a file's mode, owner, times, extended attributes or
//     attribute flags (file_setattr, and the FS_IOC_SETFLAGS,
//     FS_IOC_SETVERSION and FS_IOC_FSSETXATTR ioctls: immutable, append-only,
//     nodump …) → EPERM. Landlock does not govern them, and the program's
//     user is the daemon's (root's, for a root daemon), the owner of whatever
//     the daemon's user owns: through a read-only descriptor or a bare path
//     it could chmod /etc/shadow or the daemon's binary. Every other ioctl
//     (TCGETS, FIONREAD …) is allowed.
//   - inotify and fanotify → EPERM: a watch needs only search access, so it
//     would report the names of files created, opened or changed in host
//     directories Landlock will not let the program list.
//   - kernel keyrings (keyctl, add_key, request_key) → ENOSYS: keyrings are
//     the daemon user's, not namespaced, so the program could read the
//     host's keys and plant keys that outlive the run. ENOSYS is what a
//     kernel built without keys returns, which libraries that use keyrings
//     (krb5, keyutils) already take as "no keyrings here" and fall back.
//   - memory that is no address space: memfd_create, memfd_secret and
//     shmget → ENOSYS (what a kernel without them returns; CPython's
//     multiprocessing uses /dev/shm, a tmpfs the init bounds). Their pages
//     need not be mapped, so RLIMIT_AS would not count them; and a memfd is
//     outside every Landlock hierarchy, so /proc/self/fd/N of one could be
//     executed. execveat → ENOSYS as well: glibc's fexecve then falls back
//     to execve of /proc/self/fd/N, which Landlock checks like any path.
//   - io_uring_setup → ENOSYS: io_uring operations (IORING_OP_SOCKET …) are
//     not seen by seccomp.
//   - new namespaces: unshare() and clone() with any CLONE_NEW* flag, and
//     setns() → EPERM; clone3() → ENOSYS, as a kernel older than 5.3
//     answers, because its flags are in memory the filter cannot read: libc
//     then falls back to clone(), whose flags it can. Every namespace a run
//     made would be counted against its daemon user's host-wide limits
//     (/proc/sys/user/max_*_namespaces, checked at every ancestor user
//     namespace), which one run could exhaust for every other run and
//     process of that user, and would hold kernel memory outside the run's
//     memory cgroup. The init also sets those limits to 0 in the run's own
//     user namespace (init_linux.go), which bounds any other way in.
//   - the mount API (open_tree, open_tree_attr, move_mount, fsopen,
//     fsconfig, fsmount, fspick, mount_setattr) → EPERM. Landlock already
//     forbids the program to change its mount tree, but open_tree's
//     OPEN_TREE_CLONE copies a mount without its submounts into a detached
//     tree whose files Landlock still lets it read (they are the same
//     inodes): a copy of /proc without the masks over it (init_linux.go).
//   - chroot() → EPERM. The program is root in its user namespace, and
//     Landlock does not govern a change of root: the daemon makes a session
//     fork's rules for the namespace's /proc and /dev/shm through its
//     source's /proc/<pid>/root, which a chroot would point at a directory
//     of the program's, its dev/shm a symbolic link to a tree of its choice
//     (the source's own directory, which the fork must not write).
//   - ptrace, process_vm_readv, process_vm_writev and pidfd_getfd → EPERM.
//     Within its own processes a program could otherwise trace its
//     interpreter and never wait for it, so that the daemon's kill of a
//     session leaves a traced zombie nobody reaps (session/close never
//     returned), or cancel every stop of the idle freeze (docs/containment.md
//     §4.3); nothing a program needs does it (a debugger runs outside).
//   - fallocate() with any mode but 0 → EOPNOTSUPP, what a file system
//     without the mode answers (posix_fallocate then writes zeros):
//     FALLOC_FL_KEEP_SIZE allocates blocks past a file's end, which
//     RLIMIT_FSIZE, the bound of each file the disk budget relies on, does
//     not check. Mode 0 extends the file, within RLIMIT_FSIZE.
//   - any other architecture or ABI (x32, int 0x80 on amd64) → ENOSYS, so
//     the filter cannot be sidestepped through another system call table.
//
// seccomp_data: nr at 0, arch at 4, args[i] at 16+8i (its low 32 bits on a
// little-endian machine; only little-endian architectures are listed).

var seccompArch = map[string]uint32{
	"amd64":   unix.AUDIT_ARCH_X86_64,
	"arm64":   unix.AUDIT_ARCH_AARCH64,
	"riscv64": unix.AUDIT_ARCH_RISCV64,
	"loong64": unix.AUDIT_ARCH_LOONGARCH64,
	"ppc64le": unix.AUDIT_ARCH_PPC64LE,
}

// Numbers of system calls newer than some GOARCH tables of x/sys: the
// architectures listed in seccompArch share one numbering from 424 on.
const (
	sysMemfdSecret  = 447
	sysOpenTreeAttr = 467
	sysFileSetattr  = 469
)

// namespaceFlags are the CLONE_NEW* flags of clone() and unshare(). In
// clone()'s first argument CLONE_NEWTIME's bit is part of the exit signal
// (CSIGNAL), where no valid signal sets it.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// epermSyscalls change a file's mode, owner, times, extended attributes or
// attribute flags, watch files and directories (legacySyscalls: the old
// forms some architectures still have besides these), enter a namespace,
// change the root, use the mount API, or reach into another process
// (ptrace and kin).
var epermSyscalls = append([]uint32{
	unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2,
	unix.SYS_FCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_UTIMENSAT,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
	sysFileSetattr,
	unix.SYS_INOTIFY_INIT1, unix.SYS_FANOTIFY_INIT, unix.SYS_FANOTIFY_MARK,
	unix.SYS_SETNS, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, sysOpenTreeAttr, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
}, legacySyscalls...)

// enosysSyscalls are refused as if the kernel did not have them: io_uring,
// keyrings, memory that is not address space (ipcSyscalls: the multiplexed
// SysV IPC entry some architectures have), execveat and clone3.
var enosysSyscalls = append([]uint32{
	unix.SYS_IO_URING_SETUP,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_MEMFD_CREATE, sysMemfdSecret, unix.SYS_SHMGET,
	unix.SYS_EXECVEAT,
	unix.SYS_CLONE3,
}, ipcSyscalls...)

// iocW is _IOW(typ, nr, size) of this architecture: its direction bits are
// those of FS_IOC_SETFLAGS (_IOW('f', 2, long)), the size field starts at
// bit 16 everywhere.
func iocW(typ, nr byte, size uint32) uint32 {
	const dirMask = ^uint32(0x1fffffff) // bits 29-31: write is 1<<30, or 4<<29 (ppc)
	return uint32(unix.FS_IOC_SETFLAGS)&dirMask | size<<16 | uint32(typ)<<8 | uint32(nr)
}

// epermIoctls set a file's attribute flags or generation, in their long and
// 32-bit forms: FS_IOC_SETFLAGS, FS_IOC_SETVERSION, ext4's SETVERSION, and
// FS_IOC_FSSETXATTR (struct fsxattr, 28 bytes). The kernel takes the
// request as an unsigned int, so its low 32 bits are what the filter checks.
var epermIoctls = []uint32{
	iocW('f', 2, 8), iocW('f', 2, 4),
	iocW('v', 2, 8), iocW('v', 2, 4),
	iocW('f', 4, 8), iocW('f', 4, 4),
	iocW('X', 32, 28),
}

// A filter is written with symbolic jump targets: the instruction indexes
// of the returns are only known once every check is laid out.
type bpfLabel int

const (
	toAllow bpfLabel = iota
	toEACCES
	toEPERM
	toENOSYS
	toSocket     // the socket() family check
	toInetType   // the socket() type check of AF_INET and AF_INET6
	toNetlink    // the socket() protocol check of AF_NETLINK
	toSocketpair // the socketpair() type check
	toIoctl      // the ioctl() request check
	toNamespaces // the clone() and unshare() flags check
	toFallocate  // the fallocate() mode check
	toEOPNOTSUPP
	labels
)

type bpfInsn struct {
	unix.SockFilter
	jt, jf bpfLabel // targets of a conditional jump; nextInsn: fall through
}

const nextInsn bpfLabel = -1

func seccompFilter() ([]unix.SockFilter, error) {
	arch, ok := seccompArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for GOARCH %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		x32  = 0x40000000 // __X32_SYSCALL_BIT
	)
	load := func(off uint32) bpfInsn { return bpfInsn{unix.SockFilter{Code: ld, K: off}, nextInsn, nextInsn} }
	is := func(k uint32, then bpfLabel) bpfInsn {
		return bpfInsn{unix.SockFilter{Code: jeq, K: k}, then, nextInsn}
	}
	// jump is unconditional: both outcomes of a comparison go to the same place.
	jump := func(to bpfLabel) bpfInsn { return bpfInsn{unix.SockFilter{Code: jeq, K: 0}, to, to} }
	var p []bpfInsn
	at := make([]int, labels)
	mark := func(l bpfLabel) { at[l] = len(p) }

	p = append(p, load(4), bpfInsn{unix.SockFilter{Code: jeq, K: arch}, nextInsn, toENOSYS}, load(0),
		bpfInsn{unix.SockFilter{Code: jge, K: x32}, toENOSYS, nextInsn},
		is(unix.SYS_SOCKET, toSocket), is(unix.SYS_SOCKETPAIR, toSocketpair), is(unix.SYS_IOCTL, toIoctl),
		is(unix.SYS_CLONE, toNamespaces), is(unix.SYS_UNSHARE, toNamespaces), is(unix.SYS_FALLOCATE, toFallocate))
	for _, nr := range enosysSyscalls {
		p = append(p, is(nr, toENOSYS))
	}
	for _, nr := range epermSyscalls {
		p = append(p, is(nr, toEPERM))
	}
	p = append(p, jump(toAllow))
	mark(toIoctl)
	p = append(p, load(24))
	for _, req := range epermIoctls {
		p = append(p, is(req, toEPERM))
	}
	p = append(p, jump(toAllow))
	mark(toNamespaces)
	p = append(p, load(16), bpfInsn{unix.SockFilter{Code: jset, K: namespaceFlags}, toEPERM, toAllow})
	mark(toFallocate)
	p = append(p, load(24), is(0, toAllow), jump(toEOPNOTSUPP))
	mark(toSocket)
	p = append(p, load(16), is(unix.AF_INET, toInetType), is(unix.AF_INET6, toInetType), is(unix.AF_NETLINK, toNetlink), jump(toEACCES))
	mark(toNetlink)
	p = append(p, load(32), is(unix.NETLINK_ROUTE, toAllow), is(unix.NETLINK_USERSOCK, toAllow), jump(toEACCES))
	mark(toInetType)
	p = append(p, load(24), bpfInsn{unix.SockFilter{Code: and, K: 0xf}, nextInsn, nextInsn}, // SOCK_TYPE_MASK
		is(unix.SOCK_STREAM, toAllow), is(unix.SOCK_DGRAM, toAllow), jump(toEACCES))
	mark(toSocketpair)
	p = append(p, load(24), bpfInsn{unix.SockFilter{Code: and, K: 0xf}, nextInsn, nextInsn}, // SOCK_TYPE_MASK
		is(unix.SOCK_STREAM, toAllow), is(unix.SOCK_SEQPACKET, toAllow), jump(toEACCES))
	returns := []struct {
		l   bpfLabel
		ret uint32
	}{
		{toAllow, unix.SECCOMP_RET_ALLOW},
		{toEACCES, unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		{toEPERM, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{toENOSYS, unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{toEOPNOTSUPP, unix.SECCOMP_RET_ERRNO | uint32(unix.EOPNOTSUPP)},
	}
	for _, r := range returns {
		mark(r.l)
		p = append(p, bpfInsn{unix.SockFilter{Code: ret, K: r.ret}, nextInsn, nextInsn})
	}
	return assemble(p, at)
}

// assemble resolves symbolic targets into the relative offsets BPF jumps
// take (at most 255 instructions forward).
func assemble(p []bpfInsn, at []int) ([]unix.SockFilter, error) {
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		out[i] = in.SockFilter
		if in.Code&0x07 != unix.BPF_JMP {
			continue
		}
		for _, j := range []struct {
			l   bpfLabel
			off *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.l == nextInsn {
				continue
			}
			d := at[j.l] - i - 1
			if d < 0 || d > 255 {
				return nil, fmt.Errorf("seccomp filter: jump of %d instructions", d)
			}
			*j.off = uint8(d)
		}
	}
	return out, nil
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

// seccompFilterBytes is the filter as the kernel's struct sock_filter
// array (8 bytes an instruction, native byte order), for a process that
// installs it itself (a sandboxed fork server's program, py/sandboxfork.py).
func seccompFilterBytes() ([]byte, error) {
	f, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*int(unsafe.Sizeof(f[0]))), nil
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
	f.OK, f.Detail = true, "only inet and netlink sockets, stream socket pairs, no file metadata or attribute flag changes, "+
		"no fallocate past a file's end, no inotify or fanotify, no keyrings, no memfd or SysV shared memory, no execveat, no io_uring, no new namespaces, no mount API"
	return f
}
