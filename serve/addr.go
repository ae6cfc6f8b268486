package serve

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Addr is a parsed listen address: unix:PATH, tcp:HOST:PORT or
// ws://HOST:PORT/PATH (docs/service.md §1).
type Addr struct {
	Scheme string // "unix", "tcp" or "ws"
	// Where is the socket path (unix) or HOST:PORT (tcp, ws).
	Where string
	Path  string // the WebSocket endpoint's path ("/" when the address has none)
}

// ParseAddr parses a --listen address; the error names what is wrong.
func ParseAddr(s string) (Addr, error) { return parseAddr("listen", s) }

// ParseAdminAddr parses an --admin address: any form --listen takes (a
// ws:// address without a path: the endpoint serves plain HTTP at its own
// paths), or a plain HOST:PORT, which is tcp:HOST:PORT.
func ParseAdminAddr(s string) (Addr, error) {
	if !strings.HasPrefix(s, "unix:") && !strings.HasPrefix(s, "tcp:") && !strings.Contains(s, "://") {
		s = "tcp:" + s
	}
	a, err := parseAddr("admin", s)
	if err == nil && a.Scheme == "ws" && a.Path != "/" {
		return Addr{}, fmt.Errorf("admin address %q: the admin endpoint serves /healthz, /readyz and /metrics; give no path", s)
	}
	return a, err
}

// parseAddr parses s as an address of the kind what names (listen, admin).
func parseAddr(what, s string) (Addr, error) {
	switch {
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if p == "" {
			return Addr{}, fmt.Errorf("%s address %q: unix: needs a socket path", what, s)
		}
		return Addr{Scheme: "unix", Where: p}, nil
	case strings.HasPrefix(s, "tcp:"):
		hp := strings.TrimPrefix(s, "tcp:")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return Addr{}, fmt.Errorf("%s address %q: tcp: needs HOST:PORT: %v", what, s, err)
		}
		return Addr{Scheme: "tcp", Where: hp}, nil
	case strings.HasPrefix(s, "ws://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Addr{}, fmt.Errorf("%s address %q: ws:// needs HOST:PORT and an optional path, nothing else", what, s)
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return Addr{Scheme: "ws", Where: u.Host, Path: p}, nil
	}
	return Addr{}, fmt.Errorf("%s address %q: must start with unix:, tcp: or ws://", what, s)
}

// Loopback reports whether only this machine can reach the address: a unix
// socket, or a host that is a loopback IP or "localhost". An empty host
// (every interface) is not.
func (a Addr) Loopback() bool {
	if a.Scheme == "unix" {
		return true
	}
	host, _, _ := net.SplitHostPort(a.Where)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// network is the address's net.Listen network.
func (a Addr) network() string {
	if a.Scheme == "unix" {
		return "unix"
	}
	return "tcp"
}

func (a Addr) String() string {
	switch a.Scheme {
	case "unix":
		return "unix:" + a.Where
	case "tcp":
		return "tcp:" + a.Where
	}
	return "ws://" + a.Where + a.Path
}
