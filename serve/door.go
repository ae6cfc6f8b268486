package serve

import (
	"fmt"
	"net"
	"strings"
	"syscall"
)

// The door: what a connection may hold before it is served
// (docs/service.md §2, §4). Every connection, served or not yet, is one
// descriptor; the listener holds at most MaxConnections +
// MaxUnauthenticated open (listen), and those and the runs' own must fit
// under RLIMIT_NOFILE (checkDescriptors). A connection that has not yet
// presented its token counts against MaxUnauthenticated only, for at most
// AuthTimeout, so connections that never authenticate cannot spend the
// connection cap an authenticated client needs.

// enterDoor counts a connection in as unauthenticated; false, and nothing
// counted, when MaxUnauthenticated are already waiting.
func (s *service) enterDoor() bool {
	if s.pending.Add(1) > int64(s.opts.MaxUnauthenticated) {
		s.pending.Add(-1)
		s.metrics.refused.WithLabelValues("unauthenticated").Inc()
		return false
	}
	return true
}

// leaveDoor counts an unauthenticated connection out (it authenticated or
// was refused).
func (s *service) leaveDoor() { s.pending.Add(-1) }

func (s *service) tooManyUnauthenticated() string {
	return fmt.Sprintf("too many unauthenticated connections: this daemon holds at most %d at once", s.opts.MaxUnauthenticated)
}

// loopbackHost reports whether a request's Host names this listener on
// loopback: a loopback IP address or "localhost", with the listener's
// port. A token-less WebSocket listener answers no other Host: a page
// whose own name an attacker rebound to 127.0.0.1 (DNS rebinding) sends
// that name, and gorilla's same-origin check alone would accept it, since
// Origin and Host then agree.
func loopbackHost(host, port string) bool {
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != port {
		return false
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return strings.EqualFold(h, "localhost")
}

// descriptorsPerRun is what one run or session keeps open at most in the
// daemon (its fd-3 socket, stdout and stderr pipes, its pidfd, its
// directory, files being staged), with room to spare.
const descriptorsPerRun = 16

// descriptorsOwn is the daemon's own beside runs and connections: the
// standard streams, the listeners, the fork server's and the watchdog's,
// upstream MCP servers, the admin endpoint's connections.
const descriptorsOwn = 128

// checkDescriptors refuses a configuration whose connections could take
// the descriptors the runs need: MaxConnections + MaxUnauthenticated open
// at once (listen's limit), the runs' and sessions' headroom and the
// daemon's own must fit under RLIMIT_NOFILE (the Go runtime has raised
// the soft limit to the hard one).
func checkDescriptors(o Options) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	runs := o.RunSlots
	need := uint64(o.MaxConnections) + uint64(o.MaxUnauthenticated) + uint64(runs)*descriptorsPerRun + descriptorsOwn
	if need > lim.Cur {
		return fmt.Errorf("CODERUN_MAX_CONNECTIONS (%d) + CODERUN_MAX_UNAUTHENTICATED (%d) + %d for each run slot and session (%d) + %d of the daemon's own = %d; RLIMIT_NOFILE is %d",
			o.MaxConnections, o.MaxUnauthenticated, descriptorsPerRun, runs, descriptorsOwn, need, lim.Cur)
	}
	return nil
}
