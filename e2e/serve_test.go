package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Service mode (docs/service.md) against the built binary: `coderun-rpc
// serve` with real connections, real children and the admin endpoint.

// service is a running `coderun-rpc serve`.
type service struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	listen string // the listener's address as logged (socket path or HOST:PORT)
	admin  string // the admin endpoint's HOST:PORT
	exited chan struct{}
	code   int
}

var servingLine = regexp.MustCompile(`msg=serving listen=(\S+) admin=(\S*)`)

// startService runs `coderun-rpc serve --listen listen --admin 127.0.0.1:0`
// with env and waits until it logs that it serves. It is stopped (SIGTERM)
// at cleanup, which must end it within the drain time.
func startService(t *testing.T, env map[string]string, listen string) *service {
	t.Helper()
	return startServiceAdmin(t, env, listen, "127.0.0.1:0")
}

// startServiceAdmin is startService with the admin endpoint at admin.
func startServiceAdmin(t *testing.T, env map[string]string, listen, admin string) *service {
	t.Helper()
	cmd := exec.Command(daemonBin, "serve", "--listen", listen, "--admin", admin)
	cmd.Env = environ(t, env)
	s := &service{t: t, cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); s.code = cmd.ProcessState.ExitCode(); close(s.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
			t.Errorf("serve did not exit after SIGTERM; stderr:\n%s", s.stderr)
		}
		if strings.Contains(s.stderr.String(), "DATA RACE") || strings.Contains(s.stderr.String(), "panic") {
			t.Errorf("the daemon reported a data race or a panic:\n%s", s.stderr)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingLine.FindStringSubmatch(s.stderr.String()); m != nil {
			s.listen, s.admin = m[1], m[2]
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited with %d; stderr:\n%s", s.code, s.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not start; stderr:\n%s", s.stderr)
	return nil
}

// stop sends SIGTERM and returns the exit code.
func (s *service) stop(timeout time.Duration) int {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	return s.exit(timeout)
}

// exit waits up to timeout for the daemon, already sent SIGTERM, to exit,
// and returns its exit code. It sends no second SIGTERM: one that lands
// while the daemon exits, its handler gone, would kill it.
func (s *service) exit(timeout time.Duration) int {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(timeout):
		s.t.Fatalf("serve still running %v after SIGTERM; stderr:\n%s", timeout, s.stderr)
	}
	return s.code
}

// get fetches an admin path: status and body.
func (s *service) get(path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.admin + path)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads one sample ("coderun_runs_total{kind=\"ok\"}") from /metrics;
// -1 when absent.
func (s *service) metric(sample string) float64 {
	s.t.Helper()
	_, body := s.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// waitMetric waits until a sample has the value.
func (s *service) waitMetric(sample string, want float64) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s.metric(sample) == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("%s stayed %v, want %v; stderr:\n%s", sample, s.metric(sample), want, s.stderr)
}

// peer is one client connection: an rpcConn over a net.Conn that answers
// every binding/call with its arguments.
type peer struct {
	t     *testing.T
	c     net.Conn
	conn  *rpcConn
	notes chan *msg // the notifications it received (the first 64)
}

// conn opens a raw connection to the service (unix or tcp, as it listens),
// closed at the test's end.
func (s *service) conn() net.Conn {
	s.t.Helper()
	network := "tcp"
	if strings.HasPrefix(s.listen, "/") {
		network = "unix"
	}
	c, err := net.Dial(network, s.listen)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// dial connects to the service; first, when given, is written before
// anything else (the token line).
func (s *service) dial(first string) *peer {
	s.t.Helper()
	c := s.conn()
	if first != "" {
		if _, err := io.WriteString(c, first); err != nil {
			s.t.Fatal(err)
		}
	}
	p := &peer{t: s.t, c: c, notes: make(chan *msg, 64), conn: newConn(c, 1)}
	p.conn.onRequest = func(m *msg) {
		var params struct{ Args json.RawMessage }
		_ = json.Unmarshal(m.Params, &params)
		go p.conn.reply(m, `"result":`+string(params.Args))
	}
	p.conn.onNote = func(m *msg) {
		select {
		case p.notes <- m:
		default:
		}
	}
	p.conn.start(c)
	return p
}

// call sends a request and waits for its response.
func (p *peer) call(method, params string) *msg {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := p.conn.Call(ctx, method, json.RawMessage(params))
	if err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
	return m
}

// run initializes if asked and runs a program to its result.
func (p *peer) run(program string) runResult {
	p.t.Helper()
	m := p.call("run", `{"program":`+strconv.Quote(program)+`}`)
	if m.Error != nil {
		p.t.Fatalf("run: %+v", m.Error)
	}
	var r runResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		p.t.Fatal(err)
	}
	return r
}

func (p *peer) initialize() *peer {
	p.t.Helper()
	if m := p.call("initialize", `{}`); m.Error != nil {
		p.t.Fatalf("initialize: %+v", m.Error)
	}
	return p
}

// refused reads what a refused connection gets: exactly one error
// response with id null, then the end of the stream.
func refused(t *testing.T, c net.Conn) (code int64, message string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	var m struct {
		ID    json.RawMessage
		Error struct {
			Code    int64
			Message string
		}
	}
	var n int
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the refusal: %v", err)
		}
		if line == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &m); err != nil || string(m.ID) != "null" {
		t.Fatalf("refusal %s: want an error response with id null", body)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Errorf("after the refusal: %q, %v; want the end of the stream", rest, err)
	}
	return m.Error.Code, m.Error.Message
}

func sockPath(t *testing.T) string { return "unix:" + filepath.Join(t.TempDir(), "s.sock") }

// TestServeConnectionsIndependent: two connections on one daemon; closing
// one ends its run (aborted, its child gone) and only its run.
func TestServeConnectionsIndependent(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_LOG_LEVEL": "debug"}, sockPath(t))
	a, b := s.dial("").initialize(), s.dial("").initialize()
	if r := a.run("return 1"); string(r.Value) != "1" {
		t.Fatalf("a: %s", r.Value)
	}
	if _, err := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(60)"}`)); err != nil {
		t.Fatal(err)
	}
	bID, _ := b.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(1)\nreturn 2"}`))
	s.waitMetric("coderun_runs_running", 2)
	a.c.Close()
	s.waitMetric(`coderun_runs_total{kind="abort"}`, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := b.conn.Wait(ctx, bID)
	if err != nil || m.Error != nil || !strings.Contains(string(m.Result), `"value":2`) {
		t.Fatalf("the other connection's run: %v %+v %s", err, m, m.Result)
	}
	s.waitMetric("coderun_connections", 1)
	if got := s.metric(`coderun_runs_total{kind="ok"}`); got != 2 {
		t.Errorf(`coderun_runs_total{kind="ok"} = %v, want 2`, got)
	}
	// Run ids repeat across connections; a run's log lines name both.
	if !regexp.MustCompile(`conn=1 run=\S+`).MatchString(s.stderr.String()) || !regexp.MustCompile(`conn=2 run=\S+`).MatchString(s.stderr.String()) {
		t.Errorf("no run log line carries its connection and run ids:\n%s", s.stderr)
	}
}

// TestServeAuth: with CODERUN_AUTH_TOKEN set, the first header line must
// carry it; a wrong or missing token gets one −32600 and the connection
// closes.
func TestServeAuth(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_AUTH_TOKEN": "s3cret"}, "tcp:127.0.0.1:0")
	good := s.dial("Authorization: Bearer s3cret\r\n").initialize()
	if r := good.run("return 3"); string(r.Value) != "3" {
		t.Fatalf("authenticated run: %s", r.Value)
	}
	for _, tc := range []struct{ first, want string }{
		{"Authorization: Bearer wrong\r\n", "authentication failed: wrong bearer token"},
		{"Authorization: Basic czNjcmV0\r\n", "authentication required: the Authorization scheme must be Bearer"},
		{"Content-Length: 2\r\n\r\n{}", "authentication required: the first header line must be Authorization: Bearer <token>"},
	} {
		c, err := net.Dial("tcp", s.listen)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.first)
		code, msg := refused(t, c)
		c.Close()
		if code != -32600 || msg != tc.want {
			t.Errorf("%q: %d %q, want -32600 %q", tc.first, code, msg, tc.want)
		}
	}
	if got := s.metric(`coderun_connections_refused_total{reason="auth"}`); got != 3 {
		t.Errorf("refused for auth: %v, want 3", got)
	}
	if strings.Contains(s.stderr.String(), "s3cret") {
		t.Errorf("the token appears in the log:\n%s", s.stderr)
	}
}

// TestServeOffLoopbackNeedsToken: a listener every interface can reach is
// refused at start-up without a token.
func TestServeOffLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(daemonBin, "serve", "--listen", "tcp:0.0.0.0:0")
	cmd.Env = environ(t, nil)
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "CODERUN_AUTH_TOKEN") {
		t.Errorf("exit %d, output:\n%s\nwant exit 2 naming CODERUN_AUTH_TOKEN", code, out)
	}
}

// TestServeMaxConnections: past CODERUN_MAX_CONNECTIONS a connection gets
// one −32600 and is closed; once one closes, the next is served.
func TestServeMaxConnections(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_MAX_CONNECTIONS": "2"}, sockPath(t))
	a := s.dial("").initialize()
	s.dial("").initialize()
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	code, msg := refused(t, c)
	c.Close()
	if want := "too many connections: this daemon serves at most 2 at once"; code != -32600 || msg != want {
		t.Errorf("third connection: %d %q, want -32600 %q", code, msg, want)
	}
	a.c.Close()
	s.waitMetric("coderun_connections", 1)
	if r := s.dial("").initialize().run("return 4"); string(r.Value) != "4" {
		t.Errorf("after a close: %s", r.Value)
	}
}

// TestServeMaxRunsPerConnection: a connection's runs past the cap are
// refused with the queue-full code; another connection is not.
func TestServeMaxRunsPerConnection(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_MAX_RUNS_PER_CONNECTION": "1"}, sockPath(t))
	a, b := s.dial("").initialize(), s.dial("").initialize()
	id, _ := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(1)\nreturn 1"}`))
	if m := a.call("run", `{"program":"return 2"}`); m.Error == nil || m.Error.Code != -32001 {
		t.Errorf("second run on a connection of 1: %s, want -32001", m.raw)
	}
	if r := b.run("return 3"); string(r.Value) != "3" {
		t.Errorf("other connection: %s", r.Value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m, err := a.conn.Wait(ctx, id); err != nil || m.Error != nil {
		t.Errorf("first run: %v %+v", err, m)
	}
}

// TestServeAdmin: the probes and the metric families the docs list.
func TestServeAdmin(t *testing.T) {
	t.Parallel()
	s := startService(t, nil, sockPath(t))
	if code, body := s.get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := s.get("/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	s.dial("").initialize().run("return 1")
	_, body := s.get("/metrics")
	for _, name := range []string{"coderun_runs_total", "coderun_run_duration_seconds_bucket", "coderun_queue_duration_seconds_bucket",
		"coderun_binding_calls_total", "coderun_children_live", "coderun_sessions", "coderun_connections",
		"coderun_warm_pool_ready", "coderun_runs_queued", "coderun_draining"} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if got := s.metric(`coderun_runs_total{kind="ok"}`); got != 1 {
		t.Errorf(`coderun_runs_total{kind="ok"} = %v, want 1`, got)
	}
}

// --admin takes the forms --listen does: tcp:HOST:PORT and unix:PATH serve
// the probes; a bad one is refused at start, naming it.
func TestServeAdminAddressForms(t *testing.T) {
	t.Parallel()
	s := startServiceAdmin(t, nil, sockPath(t), "tcp:127.0.0.1:0")
	if code, body := s.get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("tcp: /healthz: %d %q", code, body)
	}
	admin := sockPath(t) // unix:PATH
	startServiceAdmin(t, nil, sockPath(t), admin)
	client := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", strings.TrimPrefix(admin, "unix:"))
	}}}
	resp, err := client.Get("http://admin/readyz")
	if err != nil {
		t.Fatalf("unix: GET /readyz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ready\n" {
		t.Errorf("unix: /readyz: %d %q", resp.StatusCode, body)
	}
	cmd := exec.Command(daemonBin, "serve", "--listen", sockPath(t), "--admin", "ws://127.0.0.1:1/x")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), `admin address "ws://127.0.0.1:1/x"`) {
		t.Errorf("bad --admin: exit %d\n%s", code, out)
	}
}

// TestServeDrain: SIGTERM lets a run under way finish, refuses new
// connections and runs meanwhile, reports not ready, and exits 0.
func TestServeDrain(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_DRAIN_MS": "20000"}, sockPath(t))
	a := s.dial("").initialize()
	id, _ := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(1.5)\nreturn 5"}`))
	s.waitMetric("coderun_runs_running", 1)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitMetric("coderun_draining", 1)
	if code, _ := s.get("/readyz"); code != 503 {
		t.Errorf("/readyz while draining: %d, want 503", code)
	}
	if m := a.call("run", `{"program":"return 6"}`); m.Error == nil || m.Error.Message != "server is shutting down" {
		t.Errorf("a run while draining: %s, want refused", m.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m, err := a.conn.Wait(ctx, id); err != nil || !strings.Contains(string(m.Result), `"value":5`) {
		t.Errorf("the run under way: %v %+v", err, m)
	}
	if code := s.exit(20 * time.Second); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// TestServeDrainAborts: a run that outlasts CODERUN_DRAIN_MS is aborted
// and answered in the drain's last second, and the daemon exits 0.
func TestServeDrainAborts(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_DRAIN_MS": "2000"}, sockPath(t))
	a := s.dial("").initialize()
	id, _ := a.conn.Request("run", json.RawMessage(`{"program":"import time\ntime.sleep(60)"}`))
	s.waitMetric("coderun_runs_running", 1)
	start := time.Now()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := a.conn.Wait(ctx, id)
	if err != nil || !strings.Contains(string(m.Result), `"kind":"abort","message":"server is shutting down"`) {
		t.Errorf("the run: %v %+v", err, m)
	}
	if code := s.exit(20 * time.Second); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	t.Logf("SIGTERM to exit: %v", time.Since(start))
}

// TestServeNeverReads: a client that never reads its responses has its
// connection closed once a write stalls CODERUN_WRITE_STALL_MS; another
// connection is served all along.
func TestServeNeverReads(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_WRITE_STALL_MS": "500", "CODERUN_MAX_LOG_BYTES": "1000000"}, sockPath(t))
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each result carries about 1 MB of logs; the socket buffers hold far less.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	io.WriteString(c, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	for i := range 8 {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+2) + `,"method":"run","params":{"program":"print('x'*999000)"}}`
		io.WriteString(c, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	}
	other := s.dial("").initialize()
	// Each accepted connection is counted in by its own goroutine, so the
	// stalled one may not be counted yet: wait for both before waiting for it
	// to be dropped (accepted_total never goes down).
	s.waitMetric("coderun_connections_accepted_total", 2)
	deadline := time.Now().Add(30 * time.Second)
	for s.metric("coderun_connections") != 1 && time.Now().Before(deadline) {
		if r := other.run("return 7"); string(r.Value) != "7" {
			t.Fatalf("other connection: %s", r.Value)
		}
	}
	if got := s.metric("coderun_connections"); got != 1 {
		t.Fatalf("the stalled connection is still served (connections = %v); stderr:\n%s", got, s.stderr)
	}
	if !s.stderr.logged("writing to the client failed") {
		t.Errorf("no log of the failed write; stderr:\n%s", s.stderr)
	}
}

// TestServeBadFrames: an oversize frame is answered and the connection
// serves on; a header block past its cap (a slowloris that never ends its
// header) closes only that connection.
func TestServeBadFrames(t *testing.T) {
	t.Parallel()
	s := startService(t, nil, sockPath(t))
	a := s.dial("").initialize()
	big := append([]byte("Content-Length: 67108865\r\n\r\n"), make([]byte, 67108865)...)
	if err := a.conn.WriteRaw(big); err != nil { // the daemon discards it as it reads
		t.Fatal(err)
	}
	if r := a.run("return 8"); string(r.Value) != "8" {
		t.Errorf("after an oversize frame: %s", r.Value)
	}
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := s.dial("").initialize()
	for range 5 {
		io.WriteString(c, "X-Slow: "+strings.Repeat("a", 1000))
		if r := other.run("return 9"); string(r.Value) != "9" {
			t.Fatalf("other connection: %s", r.Value)
		}
	}
	code, msg := refused(t, c)
	if code != -32700 || !strings.Contains(msg, "header block exceeds 4096 bytes") {
		t.Errorf("endless header: %d %q", code, msg)
	}
}

// TestServeIdleConnections: many idle connections cost little memory and
// do not delay a run on another (figures in RELIABILITY.md).
func TestServeIdleConnections(t *testing.T) {
	t.Parallel()
	n := 1000
	if os.Getenv("CODERUN_TEST_HEAVY") == "1" {
		n = 10000
	}
	s := startService(t, map[string]string{"CODERUN_MAX_CONNECTIONS": strconv.Itoa(n + 1)}, sockPath(t))
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < n {
		c, err := net.Dial("unix", s.listen)
		if errors.Is(err, syscall.EAGAIN) { // the listen backlog is full: let the daemon accept
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	s.waitMetric("coderun_connections", float64(n))
	start := time.Now()
	if r := s.dial("").initialize().run("return 10"); string(r.Value) != "10" {
		t.Errorf("run beside %d idle connections: %s", n, r.Value)
	}
	rss := s.metric("process_resident_memory_bytes")
	t.Logf("%d idle connections: daemon RSS %.1f MB; a run beside them took %v", n, rss/1e6, time.Since(start))
	if n == 1000 && rss > 64e6 && !raceEnabled {
		t.Errorf("RSS %.1f MB with 1000 idle connections, want ≤ 64 MB", rss/1e6)
	}
}

// TestServeSlowAuth: a connection that trickles its token line (slowloris
// before authenticating) is refused when CODERUN_AUTH_TIMEOUT_MS is up,
// while an authenticated connection runs programs meanwhile.
func TestServeSlowAuth(t *testing.T) {
	t.Parallel()
	s := startService(t, map[string]string{"CODERUN_AUTH_TOKEN": "tok", "CODERUN_AUTH_TIMEOUT_MS": "8000"}, sockPath(t))
	c, err := net.Dial("unix", s.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	good := s.dial("Authorization: Bearer tok\r\n").initialize()
	for _, b := range "Authorization: Bea" {
		io.WriteString(c, string(b))
		if r := good.run("return 1"); string(r.Value) != "1" {
			t.Fatalf("the authenticated connection: %s", r.Value)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, msg := refused(t, c)
	if code != -32600 || !strings.Contains(msg, "no complete first header line (Authorization: Bearer <token>) within 8 s") {
		t.Errorf("slow token line: %d %q", code, msg)
	}
	if d := time.Since(start); d < 7*time.Second {
		t.Errorf("refused after %v, before the 8 s were up", d)
	}
}
