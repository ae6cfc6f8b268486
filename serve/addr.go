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
func ParseAddr(s string) (Addr, error) {
	switch {
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if p == "" {
			return Addr{}, fmt.Errorf("listen address %q: unix: needs a socket path", s)
		}
		return Addr{Scheme: "unix", Where: p}, nil
	case strings.HasPrefix(s, "tcp:"):
		hp := strings.TrimPrefix(s, "tcp:")
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return Addr{}, fmt.Errorf("listen address %q: tcp: needs HOST:PORT: %v", s, err)
		}
		return Addr{Scheme: "tcp", Where: hp}, nil
	case strings.HasPrefix(s, "ws://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Addr{}, fmt.Errorf("listen address %q: ws:// needs HOST:PORT and an optional path, nothing else", s)
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		return Addr{Scheme: "ws", Where: u.Host, Path: p}, nil
	}
	return Addr{}, fmt.Errorf("listen address %q: must start with unix:, tcp: or ws://", s)
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

func (a Addr) String() string {
	switch a.Scheme {
	case "unix":
		return "unix:" + a.Where
	case "tcp":
		return "tcp:" + a.Where
	}
	return "ws://" + a.Where + a.Path
}
