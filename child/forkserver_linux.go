//go:build linux

package child

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ForkServer is a long-lived process that forks one child per Spawn request,
// so that a child costs a fork instead of an interpreter start-up (SPEC §9).
// The server is started like any child (its own session, a parent-death
// SIGKILL, fds 0-2 as Start) with fd 3 a SOCK_SEQPACKET control socket; the
// program it runs speaks this package's control protocol:
//
//	daemon → server  "S" seq NUL dir NUL argv… NUL NUL env…   SCM_RIGHTS [fd0 fd1 fd2 fd3]
//	server → daemon  "P <seq> <pid> <start-time>"      the child runs, set up
//	                 "E <seq> <errno> <message>"       no child
//	                 "X <pid> <wait-status> <utime-µs> <stime-µs> <maxrss-kB>"
//
// A "P" reply promises that the child already leads its own session and has
// its parent-death signal set (the chain daemon → server → child), so
// SignalGroup and GroupEmpty work as for Start. The forked child is the
// server's, not the daemon's: the server reaps it and relays its wait status
// and rusage, which Process.Wait returns. Every message is validated; a
// malformed one kills the server, as does Close.
type ForkServer struct {
	proc *Process
	ctl  *net.UnixConn

	spawnMu   sync.Mutex        // one request in flight, so replies pair with requests
	seq       uint64            // the last request's number (under spawnMu)
	awaiting  atomic.Uint64     // the number of the request in flight, 0 when none
	replies   chan spawnReply   // capacity 1
	done      chan struct{}     // closed when the control socket has ended
	tailsDone chan struct{}     // closed when the server's stdout and stderr have ended
	mu        sync.Mutex        // guards exits and err
	exits     map[int]chan Exit // forked children not yet reported, by pid
	err       error             // why the server ended
	tail      tailBuffer        // the server's last output, for the error
	wg        sync.WaitGroup
}

type spawnReply struct {
	pid       int
	startTime uint64
	exit      chan Exit
	err       error
}

// ForkSpec is what a forked child is given; its executable is the server's.
type ForkSpec struct {
	Argv []string // the child's argument vector (the server decides its use)
	Env  []string // exact environment
	Dir  string   // working directory, required
}

// Errors reported by a ForkServer.
var (
	ErrForkServerDown = errors.New("the fork server ended (its children die with it)")
	errForkProtocol   = errors.New("fork server: malformed control message")
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

// StartForkServer starts spec's program as a fork server (see ForkServer).
func StartForkServer(spec Spec) (*ForkServer, error) {
	s, pid, err := startWired(spec, unix.SOCK_SEQPACKET)
	if err != nil {
		return nil, err
	}
	fc, err := net.FileConn(s.conn)
	s.conn.Close()
	if err != nil {
		closeFiles(s.stdout, s.stderr)
		_ = unix.Kill(pid, syscall.SIGKILL)
		_, _, _ = wait4(pid)
		return nil, err
	}
	fs := &ForkServer{
		proc:      &Process{Pid: pid, Stdout: s.stdout, Stderr: s.stderr},
		ctl:       fc.(*net.UnixConn),
		replies:   make(chan spawnReply, 1),
		done:      make(chan struct{}),
		tailsDone: make(chan struct{}),
		exits:     make(map[int]chan Exit),
	}
	fs.proc.startTime, fs.proc.hasStart = StartTime(pid)
	var tails sync.WaitGroup
	tails.Add(2)
	fs.wg.Add(4)
	for _, f := range []io.ReadCloser{s.stdout, s.stderr} {
		go func() { defer fs.wg.Done(); defer tails.Done(); fs.keepTail(f) }()
	}
	go func() { defer fs.wg.Done(); tails.Wait(); close(fs.tailsDone) }()
	go fs.readLoop()
	return fs, nil
}

// Pid is the server's process id.
func (s *ForkServer) Pid() int { return s.proc.Pid }

// Done is closed once the server can no longer spawn (it exited, broke the
// protocol, or Close was called); Err then says why.
func (s *ForkServer) Done() <-chan struct{} { return s.done }

// Err is the reason the server ended, or nil while it runs.
func (s *ForkServer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Spawn forks one child with fd 0 = /dev/null, fds 1/2 = pipes and fd 3 = a
// stream socketpair end, exactly as Start wires them, and returns it. Its
// Wait returns the wait status and rusage the server relays, or an error
// wrapping ErrForkServerDown if the server ended first (the child then dies
// of its parent-death signal). Spawns are serialised. A server that does not
// reply within spawnReplyTimeout is killed, and Spawn returns an error
// wrapping ErrForkServerDown, as it does once the server has ended.
func (s *ForkServer) Spawn(spec ForkSpec) (*Process, error) {
	st, err := openStdio()
	if err != nil {
		return nil, err
	}
	s.spawnMu.Lock()
	s.seq++
	r := s.request(s.seq, spec, unix.UnixRights(st.devNull, st.out, st.errw, st.sock))
	s.spawnMu.Unlock()
	st.closeChild()
	if r.err != nil {
		st.closeDaemon()
		return nil, r.err
	}
	p := &Process{Pid: r.pid, Conn: st.conn, Stdout: st.stdout, Stderr: st.stderr,
		startTime: r.startTime, hasStart: true, relay: r.exit}
	watchGroup(p.Pid, p.startTime) // its descendants die with the daemon too
	return p, nil
}

func (s *ForkServer) request(seq uint64, spec ForkSpec, rights []byte) spawnReply {
	msg, err := spawnRequest(seq, spec)
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

func (s *ForkServer) downErr() error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrForkServerDown, err)
	}
	return ErrForkServerDown
}

// spawnRequest encodes request seq for spec: "S" seq, NUL, dir, then NUL
// before each argv entry, an empty field, and NUL before each env entry.
// Fields are non-empty and hold no NUL, so the encoding is unambiguous.
func spawnRequest(seq uint64, spec ForkSpec) ([]byte, error) {
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

// Close stops the server: the control socket is closed (the server exits and
// its children die of their parent-death signal), the server is killed if it
// lingers, reaped, and every pending Wait returns an error.
func (s *ForkServer) Close() error {
	s.fail(errors.New("fork server: closed"))
	stop := time.AfterFunc(2*time.Second, func() { s.proc.SignalGroup(syscall.SIGKILL) })
	_, err := s.proc.Wait()
	stop.Stop()
	s.wg.Wait()
	return err
}

// fail records why the server ended (first reason wins), shuts the control
// socket and releases every waiter.
func (s *ForkServer) fail(why error) {
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
func (s *ForkServer) kill(why error) {
	s.fail(why)
	s.proc.SignalGroup(syscall.SIGKILL)
}

func (s *ForkServer) readLoop() {
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

func (s *ForkServer) handle(msg []byte) error {
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
	}
	return errForkProtocol
}

func (s *ForkServer) onSpawned(f [][]byte) error {
	v, ok := parseUints(f, 3)
	if !ok || v[1] <= 1 || v[1] > 1<<22 {
		return errForkProtocol
	}
	r := spawnReply{pid: int(v[1]), startTime: v[2], exit: make(chan Exit, 1)}
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
func (s *ForkServer) reply(seq uint64, r spawnReply) error {
	if seq == 0 || !s.awaiting.CompareAndSwap(seq, 0) {
		return errForkProtocol
	}
	s.replies <- r
	return nil
}

func (s *ForkServer) onExit(f [][]byte) error {
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
	ch <- exitOf(ws, ru)
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
func (s *ForkServer) keepTail(r io.ReadCloser) {
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
