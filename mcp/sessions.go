package mcp

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Named sessions (docs/mcp.md §1.4): run_python's "session" names a
// persistent session of the session manager (docs/protocol-sessions.md §11). Names
// belong to one MCP connection; the first call with a name opens the
// session, later ones run in it, and the connection's end closes them all.

// maxNameLen bounds a session name, in bytes (every allowed byte is ASCII).
const maxNameLen = 64

// validName checks a session name: 1 to 64 characters from A-Z a-z 0-9 and
// "_-.:", so a name reads the same in every log, message and model prompt.
func validName(name string) error {
	ok := name != "" && len(name) <= maxNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
	}
	if !ok {
		return fmt.Errorf("session must be 1 to %d characters from A-Z a-z 0-9 _ - . :, got %s", maxNameLen, strconv.Quote(name))
	}
	return nil
}

// conn is the named sessions of one MCP connection.
type conn struct {
	closed bool              // the connection ended: no more names
	names  map[string]*named // guarded by Server.mu
}

// named is one name of a connection. Its mu is held while its session opens
// (so a second call with the name waits and then runs in it) and taken
// before Server.mu.
type named struct {
	mu      sync.Mutex
	id      string // the manager's session id; "" until opened
	dropped bool   // left the connection's names: look the name up again
}

// errConnClosed refuses a name on a connection that has ended.
var errConnClosed = errors.New("the MCP connection has ended")

// entry returns the name's entry on ss's connection, locked, creating both
// as needed. The first name of a connection starts the watch that closes
// its sessions when it ends.
func (s *Server) entry(ss *sdk.ServerSession, name string) (*named, error) {
	for {
		s.mu.Lock()
		c := s.conns[ss]
		if c == nil && s.served {
			s.mu.Unlock()
			return nil, errConnClosed
		}
		if c == nil {
			c = &conn{names: map[string]*named{}}
			s.conns[ss] = c
			s.watchers.Add(1)
			go s.watch(ss)
		}
		if c.closed {
			s.mu.Unlock()
			return nil, errConnClosed
		}
		e := c.names[name]
		if e == nil {
			e = &named{}
			c.names[name] = e
		}
		s.mu.Unlock()
		e.mu.Lock()
		if !e.dropped {
			return e, nil
		}
		e.mu.Unlock()
	}
}

// dropLocked removes e (whose mu the caller holds) from ss's names.
func (s *Server) dropLocked(ss *sdk.ServerSession, name string, e *named) {
	e.id, e.dropped = "", true
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conns[ss]; c != nil && c.names[name] == e {
		delete(c.names, name)
	}
}

// sessionFor is the session id of name on ss's connection, opening the
// session with lim as its runs' defaults when the name is new (opened is
// then true). A session that exists keeps its address space: lim may not
// set addressSpaceMb then.
func (s *Server) sessionFor(ss *sdk.ServerSession, name string, lim protocol.Limits, packages []string) (id string, opened bool, err error) {
	e, err := s.entry(ss, name)
	if err != nil {
		return "", false, err
	}
	defer e.mu.Unlock()
	if e.id != "" {
		if lim.AddressSpaceMb != 0 {
			return "", false, errors.New("limits.addressSpaceMb is fixed for the session's lifetime (it can be set by the call that opens the session)")
		}
		if packages != nil {
			return "", false, errors.New("packages are installed when the session opens (the first call with its name); this session is open")
		}
		return e.id, false, nil
	}
	id, err = s.opts.Manager.OpenSession(protocol.SessionParams{Limits: lim, Packages: packages}, nil)
	if err != nil {
		s.dropLocked(ss, name, e)
		return "", false, openError(name, err)
	}
	e.id = id
	return id, true, nil
}

// openError says why a name's session could not be opened.
func openError(name string, err error) error {
	var se *session.SessionError
	if errors.As(err, &se) && se.Cap {
		return fmt.Errorf("cannot open session %q: %s; close one with close_python_session first", name, se.Message)
	}
	return fmt.Errorf("cannot open session %q: %w", name, err)
}

// lookup is name's entry on ss's connection, nil when it has none.
func (s *Server) lookup(ss *sdk.ServerSession, name string) *named {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.conns[ss]; c != nil {
		return c.names[name]
	}
	return nil
}

// forget drops name from ss's connection when it still stands for id (the
// session ended: the next call with the name opens a fresh one).
func (s *Server) forget(ss *sdk.ServerSession, name, id string) {
	e := s.lookup(ss, name)
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.id == id {
		s.dropLocked(ss, name, e)
	}
}

// closeNamed closes name's session on ss's connection; the error says the
// name is not open, or that its session had ended already.
func (s *Server) closeNamed(ss *sdk.ServerSession, name string) error {
	e := s.lookup(ss, name)
	if e == nil {
		return fmt.Errorf("session %q is not open", name)
	}
	e.mu.Lock()
	id := e.id
	if id == "" { // dropped meanwhile, or its open failed
		e.mu.Unlock()
		return fmt.Errorf("session %q is not open", name)
	}
	s.dropLocked(ss, name, e)
	e.mu.Unlock()
	wait, err := s.opts.Manager.CloseSession(id)
	if err != nil {
		return endedError(name, err)
	}
	wait()
	return nil
}

// watch closes ss's sessions once its connection ends.
func (s *Server) watch(ss *sdk.ServerSession) {
	defer s.watchers.Done()
	_ = ss.Wait()
	s.mu.Lock()
	c := s.conns[ss]
	c.closed = true
	names := c.names
	c.names = nil
	s.mu.Unlock()
	for name, e := range names {
		e.mu.Lock() // waits for an open under way
		id := e.id
		e.id, e.dropped = "", true
		e.mu.Unlock()
		if id == "" {
			continue
		}
		if wait, err := s.opts.Manager.CloseSession(id); err == nil {
			wait()
		} else {
			s.log.Debug("named session had ended before its connection", "session", name, "err", err)
		}
	}
}

// endedError is what a model reads when a name's session ended without
// close_python_session: lost (its process died, a run timed out or was
// cancelled), closed for idleness, or closed at shutdown.
func endedError(name string, err error) error {
	var se *session.SessionError
	if !errors.As(err, &se) {
		return err
	}
	return errors.New(lostText(name, se.State, se.Reason))
}

// lostText says that name's session ended and why, and what the next call
// with the name does.
func lostText(name, state, reason string) string {
	why := "was lost"
	switch {
	case state == session.StateClosed && reason == session.ReasonIdle:
		why = "was closed after being idle too long"
	case state == session.StateClosed:
		why = "was closed (" + reason + ")"
	case reason != "":
		why += " (" + reason + ")"
	}
	return fmt.Sprintf("session %q %s: its variables are gone; the next run_python call with session %q starts a fresh session", name, why, name)
}
