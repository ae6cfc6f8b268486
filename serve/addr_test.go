package serve

import (
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     Addr
		loopback bool
		err      string
	}{
		{in: "unix:/run/c.sock", want: Addr{Scheme: "unix", Where: "/run/c.sock"}, loopback: true},
		{in: "tcp:127.0.0.1:7070", want: Addr{Scheme: "tcp", Where: "127.0.0.1:7070"}, loopback: true},
		{in: "tcp:[::1]:0", want: Addr{Scheme: "tcp", Where: "[::1]:0"}, loopback: true},
		{in: "tcp:localhost:1", want: Addr{Scheme: "tcp", Where: "localhost:1"}, loopback: true},
		{in: "tcp:0.0.0.0:7070", want: Addr{Scheme: "tcp", Where: "0.0.0.0:7070"}},
		{in: "tcp::7070", want: Addr{Scheme: "tcp", Where: ":7070"}},
		{in: "ws://127.0.0.1:9/rpc", want: Addr{Scheme: "ws", Where: "127.0.0.1:9", Path: "/rpc"}, loopback: true},
		{in: "ws://10.0.0.1:9", want: Addr{Scheme: "ws", Where: "10.0.0.1:9", Path: "/"}},
		{in: "unix:", err: "needs a socket path"},
		{in: "tcp:localhost", err: "tcp: needs HOST:PORT"},
		{in: "ws://host/rpc", err: "ws:// needs HOST:PORT"},
		{in: "ws://h:1/x?y=1", err: "nothing else"},
		{in: "http://h:1", err: "must start with unix:, tcp: or ws://"},
	} {
		a, err := ParseAddr(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("%s: %v, want an error naming it and saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || a != tc.want || a.Loopback() != tc.loopback {
			t.Errorf("%s: %+v %v loopback=%v, want %+v loopback=%v", tc.in, a, err, a.Loopback(), tc.want, tc.loopback)
		}
		if a.String() != tc.in && tc.want.Path != "/" {
			t.Errorf("%s: String() = %s", tc.in, a.String())
		}
	}
}

func TestCheckToken(t *testing.T) {
	s := &service{opts: Options{Token: "s3cret"}}
	for value, want := range map[string]string{
		"Bearer s3cret":  "",
		"bearer s3cret":  "",
		"Bearer s3cre":   "authentication failed: wrong bearer token",
		"Bearer s3cret2": "authentication failed: wrong bearer token",
		"Basic s3cret":   "authentication required: the Authorization scheme must be Bearer",
		"":               "authentication required: the Authorization scheme must be Bearer",
	} {
		got := ""
		if err := s.checkToken(value); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%q: %q, want %q (empty: accepted)", value, got, want)
		}
	}
}

// --admin takes every --listen form (a ws:// one without a path) and a plain
// HOST:PORT.
func TestParseAdminAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Addr
		err  string
	}{
		{in: "127.0.0.1:9090", want: Addr{Scheme: "tcp", Where: "127.0.0.1:9090"}},
		{in: ":9090", want: Addr{Scheme: "tcp", Where: ":9090"}},
		{in: "tcp:127.0.0.1:9090", want: Addr{Scheme: "tcp", Where: "127.0.0.1:9090"}},
		{in: "unix:/run/admin.sock", want: Addr{Scheme: "unix", Where: "/run/admin.sock"}},
		{in: "ws://127.0.0.1:9090", want: Addr{Scheme: "ws", Where: "127.0.0.1:9090", Path: "/"}},
		{in: "ws://127.0.0.1:9090/metrics", err: "give no path"},
		{in: "localhost", err: "tcp: needs HOST:PORT"},
		{in: "http://h:1", err: "must start with unix:, tcp: or ws://"},
	} {
		a, err := ParseAdminAddr(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "admin address") {
				t.Errorf("%s: %v, want an admin address error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || a != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.in, a, err, tc.want)
		}
	}
}
