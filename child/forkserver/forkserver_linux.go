//go:build linux

package forkserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/internal/spawn"
	"golang.org/x/sys/unix"
)

// Server is a long-lived process that forks one child per Spawn request,
// so that a child costs a fork instead of an interpreter start-up (docs/containment-start-modes.md §4).
// The server is started like any child (its own session, a parent-death
// SIGKILL, fds 0-2 as Start) with fd 3 a SOCK_SEQPACKET control socket; the
// program it runs speaks this package's control protocol:
//
//	daemon → server  "S" seq NUL dir NUL argv… NUL NUL env…   SCM_RIGHTS [fd0 fd1 fd2 fd3]
//	                 "A <seq> <pid>"                   adopt a session child's fork
//	server → daemon  "P <seq> <pid> <start-time>"      the child runs, set up (or is adopted)
//	                 "E <seq> <errno> <message>"       no child
//	                 "X <pid> <wait-status> <utime-µs> <stime-µs> <maxrss-kB>"
//	                 "W <module> <why>"                an optional preload failed to import
//	                 "F <module> <why>"                a required preload failed: the server exits
//	                 "R <vmsize-kB> <vmrss-kB>"        set up and preloaded: it serves (once)
//
// Ready is closed on "R"; a spawn sent before it is answered once the server
// has set up. Preload says what the server loaded.
// A "P" reply promises that the child already leads its own session and has
// its parent-death signal set (the chain daemon → server → child), so
// SignalGroup and GroupEmpty work as for Start. The forked child is the
// server's, not the daemon's: the server reaps it and relays its wait status
// and rusage, which Process.Wait returns. Every message is validated; a
// malformed one kills the server, as does Close.
//
// The server is a child subreaper, so the fork of a session child it spawned
// (double-forked, docs/child-protocol-sessions.md §6.3) becomes its child; Adopt claims
// it. A spawned Process's Adopt method does the same.
type Server struct {
	proc *child.Process
	ctl  *net.UnixConn

	spawnMu   sync.Mutex              // one request in flight, so replies pair with requests
	seq       uint64                  // the last request's number (under spawnMu)
	awaiting  atomic.Uint64           // the number of the request in flight, 0 when none
	replies   chan spawnReply         // capacity 1
	done      chan struct{}           // closed when the control socket has ended
	tailsDone chan struct{}           // closed when the server's stdout and stderr have ended
	mu        sync.Mutex              // guards exits and err
	exits     map[int]chan child.Exit // forked children not yet reported, by pid
	err       error                   // why the server ended
	tail      tailBuffer              // the server's last output, for the error
	ready     chan struct{}           // closed on the server's R
	preload   Preload                 // filled before ready is closed, then read-only
	wg        sync.WaitGroup
}

type spawnReply struct {
	pid       int
	startTime uint64
	exit      chan child.Exit
	err       error
}

// Preload is what a server reported of its set-up: the optional modules it
// could not import, the required one that stopped it, and its size once
// ready.
type Preload struct {
	Skipped   []ModuleError // optional modules not imported (W)
	Failed    *ModuleError  // the required module that failed (F): the server exits
	VmSizeKb  int64         // the server's address space once ready
	VmRSSKb   int64         // and its resident memory
	readySeen bool
}

// ModuleError is one preload module the server could not import, and why
// (the server's one line, at most maxControlMessage bytes).
type ModuleError struct {
	Module, Why string
}

func (e *ModuleError) Error() string { return fmt.Sprintf("module %q: %s", e.Module, e.Why) }

// Spec is what a forked child is given; its executable is the server's.
type Spec struct {
	Argv []string // the child's argument vector (the server decides its use)
	Env  []string // exact environment
	Dir  string   // working directory, required
	// Extra are descriptors passed after the four of Spawn (a sandboxed
	// server's relay pipe and cgroup files); the caller keeps and closes
	// its copies.
	Extra []int
}

// Errors reported by a Server.
var (
	ErrDown         = errors.New("the fork server ended (its children die with it)")
	errForkProtocol = errors.New("fork server: malformed control message")
)

// maxControlMessage bounds one server → daemon message (real ones are < 100
// bytes); maxSpawnRequest stays under the server's 64 KiB receive buffer.
const (
	maxControlMessage = 512
	maxSpawnRequest   = 60000
)

// spawnReplyTimeout bounds the wait for a spawn's reply, which includes the
// server's own start-up on the first spawn (an interpreter start, seconds at
// worst on a loaded machine). A server that misses it is killed.
var spawnReplyTimeout = 10 * time.Second

// Start starts spec's program as a fork server (see Server).
func Start(spec child.Spec) (*Server, error) {
	s, pid, err := spawn.StartWired(spec, unix.SOCK_SEQPACKET)
	if err != nil {
		return nil, err
	}
	fc, err := net.FileConn(s.Conn)
	s.Conn.Close()
	if err != nil {
		spawn.CloseFiles(s.Stdout, s.Stderr)
		_ = unix.Kill(pid, syscall.SIGKILL)
		_, _, _ = spawn.Wait4(pid)
		return nil, err
	}
	fs := &Server{
		proc:      spawn.Started(pid, nil, s.Stdout, s.Stderr),
		ctl:       fc.(*net.UnixConn),
		replies:   make(chan spawnReply, 1),
		done:      make(chan struct{}),
		tailsDone: make(chan struct{}),
		exits:     make(map[int]chan child.Exit),
		ready:     make(chan struct{}),
	}
	var tails sync.WaitGroup
	tails.Add(2)
	fs.wg.Add(4)
	for _, f := range []io.ReadCloser{s.Stdout, s.Stderr} {
		go func() { defer fs.wg.Done(); defer tails.Done(); fs.keepTail(f) }()
	}
	go func() { defer fs.wg.Done(); tails.Wait(); close(fs.tailsDone) }()
	go fs.readLoop()
	return fs, nil
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.proc.Pid }

// Done is closed once the server can no longer spawn (it exited, broke the
// protocol, or Close was called); Err then says why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Ready is closed once the server has set up (its preload imported) and
// serves.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Preload is what the server reported of its preload so far: complete once
// Ready is closed, or once Done is closed (then Failed may say why).
func (s *Server) Preload() Preload {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.preload
	p.Skipped = slices.Clone(p.Skipped)
	return p
}

// Err is the reason the server ended, or nil while it runs.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Spawn forks one child with fd 0 = /dev/null, fds 1/2 = pipes and fd 3 = a
// stream socketpair end, exactly as Start wires them (and spec.Extra from fd
// 4 on), and returns it. Its
// Wait returns the wait status and rusage the server relays, or an error
// wrapping ErrDown if the server ended first (the child then dies
// of its parent-death signal). Spawns are serialised. A server that does not
// reply within spawnReplyTimeout is killed, and Spawn returns an error
// wrapping ErrDown, as it does once the server has ended.
func (s *Server) Spawn(spec Spec) (*child.Process, error) {
	st, err := spawn.OpenStdio(unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	r := s.request(func(seq uint64) ([]byte, error) { return spawnRequest(seq, spec) },
		unix.UnixRights(append([]int{st.DevNull, st.Out, st.Errw, st.Sock}, spec.Extra...)...))
	st.CloseChild()
	if r.err != nil {
		st.CloseDaemon()
		return nil, r.err
	}
	p := s.process(r)
	p.Conn, p.Stdout, p.Stderr = st.Conn, st.Stdout, st.Stderr
	return p, nil
}

// Adopt claims pid, the fork of a session child this server spawned, now an
// orphan the server reaped as subreaper (docs/child-protocol-sessions.md §6.5). The
// server refuses a pid that is not its child, does not lead its own session,
// or was already spawned or adopted, so a pid a program forged is never
// claimed. The Process has no descriptors (the caller holds the fork's) and
// works like a spawned one: Wait returns the relayed status and rusage,
// SignalGroup and GroupEmpty act on the fork's group.
func (s *Server) Adopt(pid int) (*child.Process, error) {
	if pid <= 1 {
		return nil, fmt.Errorf("fork server: adopt: invalid pid %d", pid)
	}
	r := s.request(func(seq uint64) ([]byte, error) { return fmt.Appendf(nil, "A %d %d", seq, pid), nil }, nil)
	if r.err != nil {
		return nil, r.err
	}
	if r.pid != pid {
		s.kill(errForkProtocol)
		return nil, s.downErr()
	}
	return s.process(r), nil
}

// process is the Process of a spawned or adopted child: reaped by the
// server, watched so its descendants die with the daemon, and able to have
// its own forks adopted.
func (s *Server) process(r spawnReply) *child.Process {
	p := spawn.Leader(r.pid, r.startTime)
	spawn.SetReap(p, func() (child.Exit, error) {
		if e, ok := <-r.exit; ok {
			return e, nil
		}
		return child.Exit{}, fmt.Errorf("wait %d: %w", r.pid, ErrDown)
	})
	spawn.SetAdopter(p, s.Adopt)
	spawn.WatchGroup(p) // its descendants die with the daemon too
	return p
}

// request sends the message build makes for the next sequence number, with
// rights attached, and waits for its reply. Requests are serialised.
func (s *Server) request(build func(seq uint64) ([]byte, error), rights []byte) spawnReply {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	s.seq++
	seq := s.seq
	msg, err := build(seq)
	if err != nil {
		return spawnReply{err: err}
	}
	s.awaiting.Store(seq)
	if _, _, err := s.ctl.WriteMsgUnix(msg, rights, nil); err != nil {
		s.fail(fmt.Errorf("fork server: send: %w", err))
		return spawnReply{err: s.downErr()}
	}
	deadline := time.NewTimer(spawnReplyTimeout)
	defer deadline.Stop()
	select {
	case r := <-s.replies:
		return r
	case <-s.done:
	case <-deadline.C:
		s.kill(fmt.Errorf("fork server: no reply to a spawn within %v", spawnReplyTimeout))
	}
	return spawnReply{err: s.downErr()}
}

func (s *Server) downErr() error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrDown, err)
	}
	return ErrDown
}

// spawnRequest encodes request seq for spec: "S" seq, NUL, dir, then NUL
// before each argv entry, an empty field, and NUL before each env entry.
// Fields are non-empty and hold no NUL, so the encoding is unambiguous.
func spawnRequest(seq uint64, spec Spec) ([]byte, error) {
	if spec.Dir == "" || len(spec.Argv) == 0 {
		return nil, errors.New("fork server: a spawn needs a directory and an argv")
	}
	b := strconv.AppendUint([]byte{'S'}, seq, 10)
	b = append(append(b, 0), spec.Dir...)
	for _, f := range spec.Argv {
		b = append(append(b, 0), f...)
	}
	b = append(b, 0)
	for _, f := range spec.Env {
		b = append(append(b, 0), f...)
	}
	for _, f := range append(append([]string{spec.Dir}, spec.Argv...), spec.Env...) {
		if f == "" || strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("fork server: empty field or NUL byte in a spawn request (%q)", f)
		}
	}
	if len(b) > maxSpawnRequest {
		return nil, fmt.Errorf("fork server: spawn request of %d bytes exceeds %d", len(b), maxSpawnRequest)
	}
	return b, nil
}

// ErrClosed is why a server ended when Close ended it (Err).
var ErrClosed = errors.New("fork server: closed")

// Close stops the server: the control socket is closed (the server exits and
// its children die of their parent-death signal), the server is killed if it
// lingers, reaped, and every pending Wait returns an error.
func (s *Server) Close() error {
	s.fail(ErrClosed)
	stop := time.AfterFunc(2*time.Second, func() { s.proc.SignalGroup(syscall.SIGKILL) })
	_, err := s.proc.Wait()
	stop.Stop()
	s.wg.Wait()
	return err
}

// fail records why the server ended (first reason wins), shuts the control
// socket and releases every waiter.
func (s *Server) fail(why error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = why
	exits := s.exits
	s.exits = nil
	s.mu.Unlock()
	s.ctl.Close()
	close(s.done)
	for _, ch := range exits {
		close(ch)
	}
}

// kill ends a misbehaving server. The reason is recorded before the signal:
// the other way round, readLoop could see the death first and record
// "exited" in its place.
func (s *Server) kill(why error) {
	s.fail(why)
	s.proc.SignalGroup(syscall.SIGKILL)
}

func (s *Server) readLoop() {
	defer s.wg.Done()
	buf := make([]byte, maxControlMessage+1)
	for {
		n, err := s.ctl.Read(buf)
		if err != nil || n == 0 {
			// The server's last words (a traceback) may still be in its pipes.
			select {
			case <-s.tailsDone:
			case <-time.After(time.Second):
			}
			s.fail(fmt.Errorf("fork server: exited (%s)", s.tail.String()))
			return
		}
		if err := s.handle(buf[:n]); err != nil {
			s.kill(err)
			return
		}
	}
}

func (s *Server) handle(msg []byte) error {
	if len(msg) > maxControlMessage || len(msg) < 2 || msg[1] != ' ' {
		return errForkProtocol
	}
	f := bytes.Split(msg[2:], []byte{' '})
	switch msg[0] {
	case 'P':
		return s.onSpawned(f)
	case 'E':
		seq, text, _ := bytes.Cut(msg[2:], []byte{' '})
		n, ok := parseUints([][]byte{seq}, 1)
		if !ok {
			return errForkProtocol
		}
		return s.reply(n[0], spawnReply{err: fmt.Errorf("fork server: fork: %s", text)})
	case 'X':
		return s.onExit(f)
	case 'W', 'F':
		return s.onPreloadFailed(msg[0] == 'F', msg[2:])
	case 'R':
		return s.onReady(f)
	}
	return errForkProtocol
}

// onPreloadFailed records a W or F: "<module> <why>", the module a dotted
// name, before the server is ready.
func (s *Server) onPreloadFailed(required bool, rest []byte) error {
	name, why, _ := bytes.Cut(rest, []byte{' '})
	if !ModuleName(string(name)) {
		return errForkProtocol
	}
	e := ModuleError{Module: string(name), Why: strings.ToValidUTF8(string(why), "?")}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.preload.readySeen || s.preload.Failed != nil {
		return errForkProtocol
	}
	if required {
		s.preload.Failed = &e
	} else {
		s.preload.Skipped = append(s.preload.Skipped, e)
	}
	return nil
}

// onReady records R "<vmsize-kB> <vmrss-kB>", once, and closes Ready.
func (s *Server) onReady(f [][]byte) error {
	v, ok := parseUints(f, 2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || s.preload.readySeen || s.preload.Failed != nil {
		return errForkProtocol
	}
	s.preload.readySeen, s.preload.VmSizeKb, s.preload.VmRSSKb = true, int64(v[0]), int64(v[1])
	close(s.ready)
	return nil
}

// ModuleName reports whether name is a dotted Python module name of ASCII
// identifiers (CODERUN_PRELOAD's rule, and what a server may name).
func ModuleName(name string) bool {
	if name == "" || len(name) > maxModuleName {
		return false
	}
	for part := range strings.SplitSeq(name, ".") {
		if part == "" || part[0] >= '0' && part[0] <= '9' {
			return false
		}
		for _, c := range []byte(part) {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// maxModuleName bounds one module name (the server's message must fit
// maxControlMessage with its reason).
const maxModuleName = 200

func (s *Server) onSpawned(f [][]byte) error {
	v, ok := parseUints(f, 3)
	if !ok || v[1] <= 1 || v[1] > 1<<22 {
		return errForkProtocol
	}
	r := spawnReply{pid: int(v[1]), startTime: v[2], exit: make(chan child.Exit, 1)}
	s.mu.Lock()
	if s.exits != nil {
		s.exits[r.pid] = r.exit
	} else {
		close(r.exit) // the server already ended: its Wait must not block
	}
	s.mu.Unlock()
	return s.reply(v[0], r)
}

// reply hands r to the Spawn waiting for request seq; a reply to any other
// request (stale, repeated, unasked) is a protocol error.
func (s *Server) reply(seq uint64, r spawnReply) error {
	if seq == 0 || !s.awaiting.CompareAndSwap(seq, 0) {
		return errForkProtocol
	}
	s.replies <- r
	return nil
}

func (s *Server) onExit(f [][]byte) error {
	v, ok := parseUints(f, 5)
	if !ok || v[1] > 0xffff {
		return errForkProtocol
	}
	s.mu.Lock()
	ch := s.exits[int(v[0])]
	delete(s.exits, int(v[0]))
	s.mu.Unlock()
	if ch == nil {
		return nil // a child whose spawn reply was refused, or a stray
	}
	ws := unix.WaitStatus(v[1])
	ru := unix.Rusage{Utime: unix.NsecToTimeval(int64(v[2]) * 1000),
		Stime: unix.NsecToTimeval(int64(v[3]) * 1000), Maxrss: int64(v[4])}
	ch <- spawn.ExitOf(ws, ru)
	return nil
}

// parseUints parses exactly n decimal fields below 2^53.
func parseUints(f [][]byte, n int) ([]uint64, bool) {
	if len(f) != n {
		return nil, false
	}
	v := make([]uint64, n)
	for i, b := range f {
		x, err := strconv.ParseUint(string(b), 10, 53)
		if err != nil {
			return nil, false
		}
		v[i] = x
	}
	return v, true
}

// keepTail keeps the last of r's output in s.tail until end of stream.
func (s *Server) keepTail(r io.ReadCloser) {
	defer r.Close()
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		s.tail.write(buf[:n])
		if err != nil {
			return
		}
	}
}

// tailBuffer keeps the last tailMax bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 2048

func (t *tailBuffer) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		return "no output"
	}
	return "last output: " + strconv.Quote(string(bytes.TrimSpace(t.buf)))
}
