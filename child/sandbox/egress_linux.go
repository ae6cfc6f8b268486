//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProxyPort is where, inside a run's network namespace, 127.0.0.1 reaches
// the daemon's egress proxy (docs/containment.md §6): the one TCP port the
// program's Landlock domain may connect to. Nothing listens there unless
// the daemon put its listener there (ListenInNetwork) or had the init make
// it (Config.ProxyListener, TakeListener).
const ProxyPort = 3128

// proxyFd is where an init made with Config.ProxyListener holds the proxy's
// listener for the daemon to take: above the init's few descriptors (stdio,
// relay, cgroups, the fork init's binary). Not inherited by the program.
const proxyFd = 100

// llRuleNetPort and llNetPortAttr are Landlock's network port rule (ABI 4;
// golang.org/x/sys has the access rights but not the rule).
const llRuleNetPort = 2

type llNetPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// llAllowProxyConnect lets the ruleset's domain connect to ProxyPort.
func llAllowProxyConnect(rulesetFd int) error {
	attr := llNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: ProxyPort}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFd), llRuleNetPort,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule (connect to port %d): %w", ProxyPort, e)
	}
	return nil
}

// ListenInNetwork brings up the loopback interface of the network namespace
// of process pid (a run's init) and returns a socket listening on
// 127.0.0.1:ProxyPort there. The socket is the daemon's: the run's
// connections to that address wait on it until the daemon accepts them,
// and no path or name the program could rename leads to it. The daemon
// enters the namespace from one locked thread, so this needs CAP_SYS_ADMIN
// in the daemon's own user namespace (a root daemon); the thread is
// discarded if it cannot return.
func ListenInNetwork(pid int) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(own)
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once back in the daemon's namespace
		if err := unix.Setns(pidfd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("entering the run's network namespace: %w", err)}
			return
		}
		fd, err := -1, errSameNamespace
		if !sameNamespace(own) { // a pid recycled by a host process: never listen on the host
			fd, err = listenLoopback()
		}
		if unix.Setns(own, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the locked thread exits with the goroutine
		}
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	return os.NewFile(uintptr(r.fd), "egress-proxy"), nil
}

// CanEnterNetwork reports whether this process may make a run's listener
// with ListenInNetwork: setns into a network namespace needs CAP_SYS_ADMIN
// in the caller's own user namespace too. Without it, the run's init makes
// the listener (Config.ProxyListener) and the daemon takes it (TakeListener).
func CanEnterNetwork() bool {
	var data [2]unix.CapUserData
	if unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]) != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0
}

// errSameNamespace: the process's network namespace is the daemon's.
var errSameNamespace = errors.New("the process shares the daemon's network namespace")

// sameNamespace reports whether the calling thread's network namespace is
// the one own refers to.
func sameNamespace(own int) bool {
	var a, b unix.Stat_t
	if unix.Fstat(own, &a) != nil || unix.Stat("/proc/thread-self/ns/net", &b) != nil {
		return true // unknown: treat as the daemon's
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// listenLoopback, inside the run's network namespace: lo up, then a
// listening socket on 127.0.0.1:ProxyPort.
func listenLoopback() (int, error) {
	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(ctl)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return -1, err
	}
	if err := unix.IoctlIfreq(ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		return -1, fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(ctl, unix.SIOCSIFFLAGS, ifr); err != nil {
		return -1, fmt.Errorf("lo up: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: ProxyPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind 127.0.0.1:%d: %w", ProxyPort, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// listenForDaemon, in the init of a run with Config.ProxyListener, before
// the program starts: lo up and the proxy's listener at proxyFd
// (close-on-exec), where TakeListener finds it. The program cannot bind the
// port first: it does not run yet, and its Landlock domain binds nothing. On
// failure the init holds no listener: the daemon's take fails and the run
// has no egress, never more.
func listenForDaemon() {
	fd, err := listenLoopback()
	if err != nil {
		return
	}
	if _, err := unix.FcntlInt(uintptr(proxyFd), unix.F_GETFD, 0); err == unix.EBADF && unix.Dup3(fd, proxyFd, unix.O_CLOEXEC) == nil {
		closeWhenTaken()
	}
	unix.Close(fd)
}

// proxyTaken is the signal with which the daemon tells the init it has
// taken the listener.
const proxyTaken = unix.SIGUSR1

// closeWhenTaken has the init close its copy of the listener once the
// daemon has taken it, so that the daemon's copy is the only one. A
// program that sends the signal first only loses its own run's egress.
func closeWhenTaken() {
	taken := make(chan os.Signal, 1)
	signal.Notify(taken, proxyTaken)
	go func() {
		<-taken
		signal.Stop(taken)
		unix.Close(proxyFd)
	}()
}

// TakeListener takes, with pidfd_getfd, the proxy's listener that the init of
// pid's run made (Config.ProxyListener), and tells the init to close its
// copy: pid is the run's init, or a member of a session, the init's child. It needs no privilege (the init is the
// daemon's descendant, of the same user; the program's seccomp filter
// refuses pidfd_getfd, so only the daemon takes it). Call it once the
// program has started (its first boot-ack): the init listens before that.
// The descriptor must be a TCP socket listening on 127.0.0.1:ProxyPort in a
// network namespace other than the daemon's (a recycled pid's is refused).
func TakeListener(pid int) (*os.File, error) {
	init := pid
	if ns, ok := innermostPid(pid); ok && ns != 1 {
		init, ok = parentOf(pid)
		if !ok {
			return nil, fmt.Errorf("process %d is gone", pid)
		}
	}
	pidfd, err := unix.PidfdOpen(init, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	// Checked after the open, so that it holds for the process the pidfd
	// names: PID 1 of a namespace below the daemon's (the daemon's own PID 1
	// is never a run's init).
	if ns, ok := innermostPid(init); !ok || ns != 1 || init == 1 {
		return nil, fmt.Errorf("process %d is not a run's init", init)
	}
	fd, err := unix.PidfdGetfd(pidfd, proxyFd, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_getfd: %w", err)
	}
	if err := checkProxyListener(fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	unix.PidfdSendSignal(pidfd, proxyTaken, nil, 0) // the init closes its copy
	return os.NewFile(uintptr(fd), "egress-proxy"), nil
}

// errNotProxyListener: the descriptor taken is not the init's listener.
var errNotProxyListener = errors.New("the init's descriptor is not a listener on 127.0.0.1:3128 in the run's network namespace")

// checkProxyListener reports whether fd is a listening TCP socket bound to
// 127.0.0.1:ProxyPort outside the daemon's network namespace.
func checkProxyListener(fd int) error {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return errNotProxyListener
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || v != unix.IPPROTO_TCP {
		return errNotProxyListener
	}
	sa, err := unix.Getsockname(fd)
	if in, ok := sa.(*unix.SockaddrInet4); err != nil || !ok || in.Port != ProxyPort || in.Addr != [4]byte{127, 0, 0, 1} {
		return errNotProxyListener
	}
	ns, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return errNotProxyListener
	}
	defer unix.Close(ns)
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(own)
	var a, b unix.Stat_t
	if unix.Fstat(ns, &a) != nil || unix.Fstat(own, &b) != nil || (a.Dev == b.Dev && a.Ino == b.Ino) {
		return errNotProxyListener
	}
	return nil
}
