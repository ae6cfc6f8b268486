package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The service's door against an attacker (docs/service.md §1, §2, §4, §6):
// DNS rebinding into a token-less WebSocket listener, a client that never
// reads, connections that never authenticate or never finish their upgrade,
// and a drain that a stalled client cannot stretch. Every socket is on
// loopback or a unix socket.

// upgradeStatus sends a WebSocket upgrade request for /rpc to the service
// with the given Host and Origin ("" for none) and returns the status code
// of the answer.
func (s *service) upgradeStatus(host, origin string) int {
	s.t.Helper()
	c, err := net.Dial("tcp", s.listen)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	req := "GET /rpc HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	if origin != "" {
		req += "Origin: " + origin + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		s.t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		s.t.Fatalf("upgrade with Host %q: %v", host, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeC650WebSocketRebinding: without a token, the WebSocket listener
// upgrades only requests whose Host is a loopback name with the listener's
// port and whose Origin is absent or that same loopback origin; a page
// whose name was rebound to 127.0.0.1 gets 403 before any upgrade.
func TestServeC650WebSocketRebinding(t *testing.T) {
	t.Parallel()
	s := startService(t, nil, "ws://127.0.0.1:0/rpc")
	_, port, _ := net.SplitHostPort(s.listen)
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{"evil.example:" + port, "", http.StatusForbidden},
		{"127.0.0.1.evil.example:" + port, "", http.StatusForbidden},
		{"127.0.0.1:1", "", http.StatusForbidden},
		{"127.0.0.1", "", http.StatusForbidden},
		{"127.0.0.1:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{"127.0.0.1:" + port, "null", http.StatusForbidden},
		{"127.0.0.1:" + port, "", http.StatusSwitchingProtocols},
		{"localhost:" + port, "http://localhost:" + port, http.StatusSwitchingProtocols},
		{"[::1]:" + port, "", http.StatusSwitchingProtocols},
	} {
		if got := s.upgradeStatus(tc.host, tc.origin); got != tc.want {
			t.Errorf("Host %q Origin %q: %d, want %d", tc.host, tc.origin, got, tc.want)
		}
	}
	if got := s.metric(`coderun_runs_total{kind="ok"}`); got != 0 {
		t.Errorf("runs: %v, want none", got)
	}
}

// TestServeC651NeverReaderFreesSlots: a connection that never reads while
// its runs leave large results does not hold run slots: its unsent output
// passes CODERUN_MAX_UNSENT_BYTES, it is closed (its runs end), and another
// connection's run is answered although the write stall is ten minutes.
func TestServeC651NeverReaderFreesSlots(t *testing.T) {
	t.Parallel()
	neverReaderFreesSlots(t, sockPath(t), 6, map[string]string{"CODERUN_MAX_UNSENT_BYTES": "1500000"})
}

// TestServeC651NeverReaderFreesSlotsWebSocket: the same over WebSocket (24
// runs: loopback TCP buffers take several megabytes before a write stalls).
func TestServeC651NeverReaderFreesSlotsWebSocket(t *testing.T) {
	t.Parallel()
	neverReaderFreesSlots(t, "ws://127.0.0.1:0/rpc", 24, map[string]string{"CODERUN_MAX_UNSENT_BYTES": "1500000"})
}

// TestServeC656SharedUnsentBudget: the same with the connection's own bound
// far away: every connection's unsent output together passes
// CODERUN_MAX_UNSENT_BYTES_TOTAL, and the connection that queues past it is
// closed.
func TestServeC656SharedUnsentBudget(t *testing.T) {
	t.Parallel()
	neverReaderFreesSlots(t, sockPath(t), 6, map[string]string{"CODERUN_MAX_UNSENT_BYTES": "100000000", "CODERUN_MAX_UNSENT_BYTES_TOTAL": "1500000"})
}

// neverReaderFreesSlots has one connection to listen send runs of ≈ 1 MB
// results and never read, with one run slot and a ten-minute write stall,
// then wants another connection's run answered, the first closed as fallen
// behind and no unsent output left counted.
func neverReaderFreesSlots(t *testing.T, listen string, runs int, bounds map[string]string) {
	env := map[string]string{
		"CODERUN_MAX_CONCURRENT_RUNS": "1", "CODERUN_WARM_POOL": "0", "CODERUN_WRITE_STALL_MS": "600000",
		"CODERUN_MAX_LOG_BYTES": "1000000",
	}
	for k, v := range bounds {
		env[k] = v
	}
	s := startService(t, env, listen)
	peers := s.streamPeers
	if strings.HasPrefix(listen, "ws://") {
		peers = s.wsPeers
	}
	send, otherRun := peers()
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	for i := range runs { // each result carries about 1 MB of logs
		send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i+2) + `,"method":"run","params":{"program":"print('x'*999000)"}}`)
	}
	waitFor(t, func() bool { return s.metric(`coderun_runs_total{kind="ok"}`) >= 1 }, "a run of the stalled connection to settle")
	if got := otherRun("return 1"); got != "1" {
		t.Fatalf("the other connection: %s", got)
	}
	s.waitMetric("coderun_connections", 1)
	if got := s.metric(`coderun_connections_closed_total{reason="fell-behind"}`); got != 1 {
		t.Errorf(`coderun_connections_closed_total{reason="fell-behind"} = %v, want 1`, got)
	}
	s.waitMetric("coderun_unsent_bytes", 0)
	if !s.stderr.logged("fell behind") {
		t.Errorf("no log of the connection that fell behind; stderr:\n%s", s.stderr)
	}
}

// streamPeers opens a unix or tcp connection that never reads, and returns
// what sends it one message and what runs a program on another connection
// (its value).
func (s *service) streamPeers() (send func(string), run func(string) string) {
	c := s.conn()
	other := s.dial("").initialize()
	return func(body string) { io.WriteString(c, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body) },
		func(program string) string { return string(other.run(program).Value) }
}

// wsPeers is streamPeers over WebSocket.
func (s *service) wsPeers() (send func(string), run func(string) string) {
	c, other := s.wsDial("", 0), s.wsDial("", 0)
	if m := wsExchange(s.t, other, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "1"); m.Error != nil {
		s.t.Fatalf("initialize: %+v", m.Error)
	}
	var id int
	return func(body string) { _ = c.WriteMessage(websocket.TextMessage, []byte(body)) },
		func(program string) string {
			id++
			m := wsExchange(s.t, other, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id+1)+`,"method":"run","params":{"program":`+strconv.Quote(program)+`}}`, strconv.Itoa(id+1))
			var r runResult
			_ = json.Unmarshal(m.Result, &r)
			return string(r.Value)
		}
}

// TestServeC652AuthBeforeAdmission: with a token, connections that never
// authenticate do not spend CODERUN_MAX_CONNECTIONS: an authenticated client
// is served beside as many silent ones; the silent ones have a cap of their
// own (CODERUN_MAX_UNAUTHENTICATED) and CODERUN_AUTH_TIMEOUT_MS to present
// the token.
func TestServeC652AuthBeforeAdmission(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{
		"CODERUN_AUTH_TOKEN": "tok", "CODERUN_MAX_CONNECTIONS": "3",
		"CODERUN_MAX_UNAUTHENTICATED": "4", "CODERUN_AUTH_TIMEOUT_MS": "15000", // the silent ones outlast the checks
	}, "tcp:127.0.0.1:0")
	silent := make([]net.Conn, 3)
	for i := range silent {
		c, err := net.Dial("tcp", s.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	counted := func(sample string) float64 { return max(s.metric(sample), 0) }
	waitFor(t, func() bool {
		return counted("coderun_connections")+counted("coderun_connections_unauthenticated") == 3
	}, "the silent connections to be accepted")
	good := s.dial("Authorization: Bearer tok\r\n")
	if m := good.call("initialize", `{}`); m.Error != nil {
		t.Fatalf("the authenticated client beside 3 silent ones: %+v", m.Error)
	}
	if r := good.run("return 2"); string(r.Value) != "2" {
		t.Errorf("the authenticated client's run: %s", r.Value)
	}
	// Three silent ones and one more fill the cap of four; the next is refused.
	fourth, err := net.Dial("tcp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	s.waitMetric("coderun_connections_unauthenticated", 4)
	fifth, err := net.Dial("tcp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer fifth.Close()
	code, msg := refused(t, fifth)
	if want := "too many unauthenticated connections: this daemon holds at most 4 at once"; code != -32600 || msg != want {
		t.Errorf("past the unauthenticated cap: %d %q, want -32600 %q", code, msg, want)
	}
	code, msg = refused(t, silent[0])
	if code != -32600 || !strings.Contains(msg, "within 15 s") {
		t.Errorf("a silent connection: %d %q, want refused naming 15 s", code, msg)
	}
	if got := s.metric(`coderun_connections_refused_total{reason="unauthenticated"}`); got != 1 {
		t.Errorf(`refused{reason="unauthenticated"} = %v, want 1`, got)
	}
}

// portSockets counts the sockets pid holds that are TCP connections on its
// side of port (accepted connections of a listener on port; not the
// listener itself), found by inode in /proc/<pid>/net/tcp and tcp6. Only
// those: the daemon's other sockets (a child's, a helper's) come and go.
func portSockets(t *testing.T, pid int, port string) int {
	t.Helper()
	proc := "/proc/" + strconv.Itoa(pid)
	conns := map[string]bool{}
	for _, table := range []string{"/net/tcp", "/net/tcp6"} {
		b, err := os.ReadFile(proc + table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] == "0A" { // 0A: LISTEN
				continue
			}
			if _, hexPort, ok := strings.Cut(f[1], ":"); ok && hexPort == fmt.Sprintf("%04X", atoiPort(t, port)) {
				conns[f[9]] = true
			}
		}
	}
	ents, err := os.ReadDir(proc + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(proc + "/fd/" + e.Name())
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok && conns[strings.TrimSuffix(inode, "]")] {
			n++
		}
	}
	return n
}

// atoiPort is the port of a HOST:PORT address.
func atoiPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServeC653WebSocketHalfUpgrades: half-sent upgrade requests hold no
// more descriptors than CODERUN_MAX_CONNECTIONS + CODERUN_MAX_UNAUTHENTICATED,
// each for at most CODERUN_AUTH_TIMEOUT_MS; a client behind them is
// upgraded and served.
func TestServeC653WebSocketHalfUpgrades(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{
		"CODERUN_MAX_CONNECTIONS": "2", "CODERUN_MAX_UNAUTHENTICATED": "2", "CODERUN_AUTH_TIMEOUT_MS": "1000",
		"CODERUN_WARM_POOL": "0", // no warm child holds a socket while the daemon's are counted
	}, "ws://127.0.0.1:0/rpc")
	for range 12 {
		c, err := net.Dial("tcp", s.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /rpc HTTP/1.1\r\nHost: "+s.listen+"\r\n")
	}
	d := websocket.Dialer{HandshakeTimeout: 60 * time.Second}
	c, _, err := d.Dial("ws://"+s.listen+"/rpc", nil)
	if err != nil {
		t.Fatalf("the client behind the half-sent upgrades: %v", err)
	}
	defer c.Close()
	held := portSockets(t, s.cmd.Process.Pid, s.listen)
	if held > 4 {
		t.Errorf("the daemon holds %d connections for 12 half-sent upgrades and a client, want at most 4 (the caps, the client included)", held)
	}
	t.Logf("connections held with 12 half-sent upgrades and a client: %d", held)
	if m := wsExchange(t, c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "1"); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	if m := wsExchange(t, c, `{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":"return 3"}}`, "2"); !strings.Contains(string(m.Result), `"value":3`) {
		t.Errorf("run: %s", m.Result)
	}
	// A whole request that is no upgrade: the answer ends the connection,
	// which would otherwise idle as keep-alive with no deadline.
	other, err := net.Dial("tcp", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	io.WriteString(other, "GET /elsewhere HTTP/1.1\r\nHost: "+s.listen+"\r\n\r\n")
	_ = other.SetReadDeadline(time.Now().Add(30 * time.Second))
	if answer, err := io.ReadAll(other); err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 404") {
		t.Errorf("a request that is no upgrade: %q %v, want a 404 and the end of the connection", answer, err)
	}
}

// TestServeC654DrainPastStalledClient: a client that never reads (its
// result's write stalled, the write stall 30 s) does not stretch the drain:
// with CODERUN_DRAIN_MS 1000 the daemon exits 0 well before the stall ends.
func TestServeC654DrainPastStalledClient(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{
		"CODERUN_DRAIN_MS": "1000", "CODERUN_WRITE_STALL_MS": "30000", "CODERUN_MAX_LOG_BYTES": "1000000",
	}, sockPath(t))
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(body string) { io.WriteString(c, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"run","params":{"program":"print('x'*999000)"}}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"run","params":{"program":"import time\ntime.sleep(60)"}}`)
	s.waitMetric(`coderun_runs_total{kind="ok"}`, 1)
	s.waitMetric("coderun_runs_running", 1)
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.exit(15 * time.Second); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	t.Logf("SIGTERM to exit: %v", time.Since(start))
}

// TestServeC655DescriptorBudget: connection caps that could take the
// descriptors the runs need are refused at start-up, naming the numbers
// (no kernel allows 10^11 open files).
func TestServeC655DescriptorBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a daemon that serves is killed
	defer cancel()
	cmd := exec.CommandContext(ctx, daemonBin, "serve", "--listen", sockPath(t))
	cmd.Env = environ(t, map[string]string{"CODERUN_MAX_CONNECTIONS": "100000000000"})
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "RLIMIT_NOFILE") ||
		!strings.Contains(string(out), "CODERUN_MAX_CONNECTIONS (100000000000)") {
		t.Errorf("exit %d, output:\n%s\nwant exit 2 naming CODERUN_MAX_CONNECTIONS and RLIMIT_NOFILE", code, out)
	}
}

// TestServeC657AdminConnections: connections to the admin endpoint that
// send nothing hold at most 32 descriptors; a probe behind them is answered
// once the header time frees places.
func TestServeC657AdminConnections(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_WARM_POOL": "0"}, sockPath(t))
	for range 48 {
		c, err := net.Dial("tcp", s.admin)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	waitFor(t, func() bool { return portSockets(t, s.cmd.Process.Pid, s.admin) >= 32 }, "the admin endpoint to accept its share")
	if held := portSockets(t, s.cmd.Process.Pid, s.admin); held > 32 {
		t.Errorf("the daemon holds %d sockets for 48 silent admin connections, want at most 32", held)
	}
	if code, _ := s.get("/healthz"); code != 200 {
		t.Errorf("/healthz behind the silent connections: %d", code)
	}
}
