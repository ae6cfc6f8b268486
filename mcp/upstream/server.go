package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopGrace is how long a stdio server has to exit after its stdin closes
// before its process group is killed.
const stopGrace = 2 * time.Second

// Server is one configured upstream, connected on first use and reconnected
// on the next use after its connection ends. Safe for concurrent use.
type Server struct {
	spec Spec
	log  *slog.Logger
	impl *mcp.Implementation
	caps Caps
	life context.Context // ends when the server is closed: a listing in flight stops
	end  context.CancelFunc

	sem      chan struct{} // held while connecting: one at a time
	onChange func()        // called when a listing replaced the server's tools

	mu       sync.Mutex
	sess     *link
	tools    *Tools    // nil until listed, and again once the connection ends
	listedAt time.Time // when tools was listed
	stale    bool      // the server said its tools changed: list again
	listing  *listing  // the listing in flight, nil when none
	lists    sync.WaitGroup
	closed   bool
}

func newServer(spec Spec, log *slog.Logger, impl *mcp.Implementation, caps Caps) *Server {
	life, end := context.WithCancel(context.Background())
	return &Server{spec: spec, log: log.With("mcpServer", spec.Key), impl: impl, caps: caps,
		life: life, end: end, sem: make(chan struct{}, 1)}
}

// Spec is the server's configuration.
func (s *Server) Spec() Spec { return s.spec }

// ServerError is an upstream that could not be started, listed or called; it
// names the server. Its text never holds a value of the server's ${VAR}s
// (Spec.Redact): a transport's error may quote the URL it was given.
type ServerError struct {
	Server string
	Err    error
	redact func(string) string // nil: nothing to hide
}

func (e *ServerError) Error() string {
	text := fmt.Sprintf("mcp server %q: %v", e.Server, e.Err)
	if e.redact != nil {
		text = e.redact(text)
	}
	return text
}

func (e *ServerError) Unwrap() error { return e.Err }

func (s *Server) fail(err error) error {
	return &ServerError{Server: s.spec.Key, Err: err, redact: s.spec.Redact}
}

// lock takes the connect/list lock, or gives up when ctx ends.
func (s *Server) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return s.fail(fmt.Errorf("not ready before the run's deadline: %w", context.Cause(ctx)))
	}
}

func (s *Server) unlock() { <-s.sem }

// link is a live connection: the SDK's session, and the stdio connection
// under it when this package may call tools on it directly (direct.go).
type link struct {
	*mcp.ClientSession
	direct *lineConn // nil: every call goes through the SDK
}

// session returns the live connection, connecting when there is none.
func (s *Server) session(ctx context.Context) (*link, error) {
	s.mu.Lock()
	cs, closed := s.sess, s.closed
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if closed {
		return nil, s.fail(errors.New("the daemon is shutting down"))
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	s.mu.Lock()
	cs = s.sess
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	return s.connect(ctx)
}

func (s *Server) connect(ctx context.Context) (*link, error) {
	t, err := s.transport()
	if err != nil {
		return nil, s.fail(fmt.Errorf("cannot start: %w", err))
	}
	client := mcp.NewClient(s.impl, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.toolsChanged() },
	})
	sdkSession, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, s.fail(fmt.Errorf("cannot start: %w", err))
	}
	cs := &link{ClientSession: sdkSession}
	if lt, ok := t.(*lineTransport); ok && directCalls(sdkSession) {
		cs.direct = lt.conn
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cs.Close()
		return nil, s.fail(errors.New("the daemon is shutting down"))
	}
	s.sess = cs
	s.mu.Unlock()
	s.log.Info("mcp server connected")
	go s.watch(cs)
	return cs, nil
}

// watch forgets a connection once it ends, so the next use reconnects.
func (s *Server) watch(cs *link) {
	err := cs.Wait()
	s.mu.Lock()
	if s.sess == cs {
		s.sess, s.tools = nil, nil
	}
	s.mu.Unlock()
	s.log.Info("mcp server connection ended", "err", err)
}

// drop closes cs after a call failed on it (the server exited or broke the
// protocol): the next use starts afresh.
func (s *Server) drop(cs *link) {
	s.mu.Lock()
	if s.sess == cs {
		s.sess, s.tools = nil, nil
	}
	s.mu.Unlock()
	cs.Close()
}

// toolsChanged lists the tools again when the server says they changed;
// the cached list serves meanwhile.
func (s *Server) toolsChanged() {
	s.mu.Lock()
	s.stale = true
	s.listLocked()
	s.mu.Unlock()
}

func (s *Server) transport() (mcp.Transport, error) {
	if s.spec.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: s.spec.URL,
			HTTPClient: &http.Client{Transport: headerTransport{s.spec.Headers, s.caps.MaxResultBytes + envelope, http.DefaultTransport}}}, nil
	}
	return s.command()
}

// command starts a stdio server in a process group of its own that dies with
// the daemon (parent-death signal), its stderr logged line by line.
func (s *Server) command() (mcp.Transport, error) {
	cmd := exec.Command(s.spec.Command, s.spec.Args...)
	cmd.Env = os.Environ()
	for k, v := range s.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go p.wait(stderr, s.log)
	// The reader is left open on close (the server may still be writing its
	// goodbye; an EPIPE would only fill the log): it ends when the server does.
	return &lineTransport{out: stdout, in: p, maxLine: s.caps.MaxResultBytes + envelope,
		maxPage: pageFactor*s.caps.MaxStubBytes + envelope}, nil
}

// process is a started stdio server; closing its stdin (the transport's
// writer) ends it: EOF, then the grace, then SIGKILL to the group.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	once  sync.Once
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(stopGrace):
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // ESRCH: already gone
		<-p.done
	})
	return nil
}

// wait logs stderr until it ends, then reaps the server.
func (p *process) wait(stderr io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		log.Info("mcp server stderr", "line", sc.Text())
	}
	_, _ = io.Copy(io.Discard, stderr)
	err := p.cmd.Wait()
	log.Info("mcp server exited", "status", err)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // grandchildren left in the group
	close(p.done)
}

// headerTransport sends the configured headers with every request, and
// bounds the body of every response to a POST (a request's answer: a JSON
// body, or an event stream that ends with it) to maxBody bytes.
type headerTransport struct {
	headers map[string]string
	maxBody int64
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		resp.Body = &boundedBody{ReadCloser: resp.Body, bound: h.maxBody, left: h.maxBody}
	}
	return resp, err
}

// boundedBody fails the read that takes a body past bound bytes.
type boundedBody struct {
	io.ReadCloser
	bound, left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, fmt.Errorf("a response from the server exceeds %d bytes", b.bound)
	}
	return n, err
}

// close ends the connection (and a stdio server's process group); later
// uses fail.
func (s *Server) close() {
	s.end()
	s.mu.Lock()
	cs := s.sess
	s.sess, s.closed = nil, true
	s.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
	s.lists.Wait() // a listing may have started a server: it is closed by now
}
