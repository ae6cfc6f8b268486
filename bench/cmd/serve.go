package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// Service mode (docs/service.md, docs/capacity.md): the same runs over a
// Unix socket as over stdio, in the same run; many connections against one
// stdio daemon with the same slots; the memory of idle connections; and the
// load test of three instances, one drained and one killed mid-load.

// server is a running `coderun-rpc serve` on a Unix socket.
type server struct {
	cmd  *exec.Cmd
	sock string
	dir  string
}

var servingRe = regexp.MustCompile(`msg=serving listen=(\S+)`)

// startServer starts `serve --listen unix:…` with env and waits until it serves.
func startServer(o options, env ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "bench-serve-")
	if err != nil {
		return nil, err
	}
	s := &server{sock: filepath.Join(dir, "s.sock"), dir: dir}
	s.cmd = exec.Command(o.daemon, "serve", "--listen", "unix:"+s.sock)
	s.cmd.Env = append(os.Environ(), "CODERUN_PYTHON_BIN="+o.python, "CODERUN_LOG_LEVEL=info")
	s.cmd.Env = append(s.cmd.Env, env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if servingRe.MatchString(lines.Text()) {
			go func() { // keep draining the log; show warnings and errors
				for lines.Scan() {
					if t := lines.Text(); strings.Contains(t, "level=WARN") || strings.Contains(t, "level=ERROR") {
						fmt.Fprintln(os.Stderr, t)
					}
				}
			}()
			return s, nil
		}
	}
	s.kill()
	return nil, errors.New("serve exited before serving")
}

// dial opens one initialized connection; bindings are echoed.
func (s *server) dial() (*daemon, net.Conn, error) {
	c, err := net.Dial("unix", s.sock)
	if err != nil {
		return nil, nil, err
	}
	conn := newPeer(c, true)
	if _, err := call(conn, "initialize", map[string]any{}); err != nil {
		c.Close()
		return nil, nil, err
	}
	return &daemon{cmd: s.cmd, conn: conn}, c, nil
}

// stop is SIGTERM (the drain) and the exit.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(30 * time.Second)
}

func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	s.wait(5 * time.Second)
}

func (s *server) wait(d time.Duration) {
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(d):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	os.RemoveAll(s.dir)
}

// stdioAndServer starts a stdio daemon and a server with n connections to
// it, for measuring one against the other in the same run; stop ends all.
func stdioAndServer(o options, n int) (stdio *daemon, conns []*daemon, stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if stdio, err = startDaemon(o); err != nil {
		return nil, nil, func() {}, err
	}
	closers = append(closers, stdio.stop)
	srv, err := startServer(o)
	if err != nil {
		stop()
		return nil, nil, func() {}, err
	}
	closers = append(closers, srv.stop)
	for range n {
		d, c, err := srv.dial()
		if err != nil {
			stop()
			return nil, nil, func() {}, err
		}
		closers = append(closers, func() { c.Close() })
		conns = append(conns, d)
	}
	return stdio, conns, stop, nil
}

// serveUnixRows: warm return 1 over a Unix socket against stdio, the two
// daemons measured in alternating rounds (goal: p50 within 1.1×).
func serveUnixRows(o options) ([]row, error) {
	stdio, conns, stop, err := stdioAndServer(o, 1)
	if err != nil {
		return nil, err
	}
	defer stop()
	unix := conns[0]
	var overStdio, overUnix samples
	rounds := 10
	if o.quick {
		rounds = 1
	}
	for range rounds {
		for _, d := range []*daemon{stdio, unix} {
			_, _ = d.run("return 1", nil)
			s, err := timeN(max(o.samples/rounds, 3), func() error { _, err := d.run("return 1", nil); return err })
			if err != nil {
				return nil, err
			}
			if d == stdio {
				overStdio = append(overStdio, s...)
			} else {
				overUnix = append(overUnix, s...)
			}
		}
	}
	return []row{newRow("return 1, warm, unix socket (floor: stdio), p50", "ms", ms(overStdio.pct(50)), ms(overUnix.pct(50)),
		"goal ≤ 1.1×; daemons measured in alternating rounds")}, nil
}

// serveFanoutRows: 4 connections × 4 callers on one serve against one stdio
// daemon with 16 callers, the same run slots (goal: within 10 %). Both
// daemons run throughout and are measured in the order stdio, serve,
// serve, stdio, so a machine drifting during the run weighs on both alike.
func serveFanoutRows(o options) ([]row, error) {
	window := 5 * time.Second
	if o.quick {
		window = 500 * time.Millisecond
	}
	stdio, conns, stop, err := stdioAndServer(o, 4)
	if err != nil {
		return nil, err
	}
	defer stop()
	var base, got float64
	for i := range 4 {
		if i == 0 || i == 3 {
			r, err := throughput([]*daemon{stdio}, 16, window)
			if err != nil {
				return nil, err
			}
			base += r / 2
			continue
		}
		r, err := throughput(conns, 4, window)
		if err != nil {
			return nil, err
		}
		got += r / 2
	}
	return []row{newRow("return 1 throughput, 4 connections × 4 callers (floor: stdio, 16 callers)", "runs/s", base, got,
		"goal ≥ 0.9× the floor; measured stdio, serve, serve, stdio")}, nil
}

// throughput runs return 1 from callers goroutines per connection for window.
func throughput(conns []*daemon, callers int, window time.Duration) (float64, error) {
	var count atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	deadline := time.Now().Add(window)
	for _, d := range conns {
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					if _, err := d.run("return 1", nil); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					count.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(count.Load()) / window.Seconds(), nil
}

// serveIdleRows: the daemon's RSS with 1 000 idle connections (goal ≤ 64 MB).
func serveIdleRows(o options) ([]row, error) {
	n := 1000
	if o.quick {
		n = 50
	}
	srv, err := startServer(o, fmt.Sprintf("CODERUN_MAX_CONNECTIONS=%d", n+1))
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("unix", srv.sock)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	d, c, err := srv.dial() // served after all the idle ones: they are accepted
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := d.run("return 1", nil); err != nil {
		return nil, err
	}
	return []row{newRow(fmt.Sprintf("daemon RSS with %d idle connections", n), "MB", 0, d.peakRSSKb()/1024, "goal ≤ 64 MB (VmHWM)")}, nil
}

// serveLoadRows is the load test of docs/capacity.md: three instances, a
// fleet of connections spread over them running short programs; a third of
// the way in one instance is drained (SIGTERM), two thirds in another is
// killed (SIGKILL). A connection that ends reconnects to an instance that
// still accepts. Every run must complete or fail clearly (an error result,
// an error response, or its connection closing); one left unanswered for a
// minute is a hang and fails the benchmark.
func serveLoadRows(o options) ([]row, error) {
	window, fleet := 15*time.Second, 12
	if o.quick {
		window, fleet = 3*time.Second, 3
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for range 3 {
		s, err := startServer(o, "CODERUN_DRAIN_MS=2000")
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	var ok, clear, hung atomic.Int64
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for i := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadClient(servers, i, deadline, &ok, &clear, &hung)
		}()
	}
	time.Sleep(window / 3)
	go servers[0].stop()
	time.Sleep(window / 3)
	servers[1].kill()
	wg.Wait()
	if n := hung.Load(); n > 0 {
		return nil, fmt.Errorf("load test: %d runs left unanswered for a minute", n)
	}
	note := fmt.Sprintf("%d connections over 3 instances for %v; one drained at 1/3, one killed at 2/3", fleet, window)
	return []row{
		newRow("load test: runs completed", "runs", 0, float64(ok.Load()), note),
		newRow("load test: runs failed with a clear error", "runs", 0, float64(clear.Load()), "abort result, error response or closed connection"),
		newRow("load test: runs hung", "runs", 0, float64(hung.Load()), "must be 0"),
	}, nil
}

// loadClient runs programs until deadline on a connection to servers[i % 3],
// moving to the next instance that accepts whenever a run fails (the
// instance drains or died).
func loadClient(servers []*server, i int, deadline time.Time, ok, clear, hung *atomic.Int64) {
	var d *daemon
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for time.Now().Before(deadline) {
		if d == nil {
			var err error
			if d, c, err = servers[i%len(servers)].dial(); err != nil {
				i++ // refused or gone: try the next instance
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		switch loadRun(d) {
		case "ok":
			ok.Add(1)
		case "hung":
			hung.Add(1)
			return
		default: // failed clearly: a draining or dying instance; move on
			clear.Add(1)
			c.Close()
			d, c = nil, nil
			i++
		}
	}
}

// loadRun runs one short program: "ok", "failed" (an error result or
// response), "closed" (the connection ended) or "hung".
func loadRun(d *daemon) string {
	params, _ := runParams("import time\ntime.sleep(0.05)\nreturn 1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := callCtx(ctx, d.conn, "run", params)
	var refused *jsonrpc2.Error
	switch {
	case errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(err, io.ErrClosedPipe):
		return "closed"
	case errors.As(err, &refused):
		return "failed"
	case err != nil:
		return "hung"
	}
	if _, err := decodeRun(m.Result, nil); err != nil {
		return "failed"
	}
	return "ok"
}
