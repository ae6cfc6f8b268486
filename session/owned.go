package session

import "github.com/coderun-rpc/coderun-rpc/protocol"

// Sessions owned by a lane (docs/service.md §3). In service mode each
// connection opens its sessions through its lane: it can name only those
// (another lane's id, open or ended, is "unknown", so a connection never
// learns whether another's session exists), their runs queue in its lane,
// and closing the lane closes them. CODERUN_MAX_SESSIONS stays one cap for
// the daemon, whoever owns the sessions, and a lane holds at most its share
// of it (Config.MaxSessionsPerLane). The Manager's own methods
// (OpenSession, …) serve the nil owner: stdio's one peer.

// OpenSession is Manager.OpenSession for a session the lane owns. After
// Close it returns ErrShuttingDown.
func (l *Lane) OpenSession(p protocol.SessionParams, onClosed func(id, reason, message string)) (string, error) {
	if !l.enter() {
		return "", ErrShuttingDown
	}
	defer l.opening.Done()
	return l.m.openSession(l, p, onClosed)
}

// ForkSession is Manager.ForkSession of one of the lane's sessions; the
// fork is the lane's too. The lane counts the fork as under way until the
// returned function has returned.
func (l *Lane) ForkSession(id string, onClosed func(id, reason, message string)) func() (string, error) {
	if !l.enter() {
		return func() (string, error) { return "", ErrShuttingDown }
	}
	fork := l.m.forkSession(l, id, onClosed)
	return func() (string, error) {
		defer l.opening.Done()
		return fork()
	}
}

// CloseSession is Manager.CloseSession of one of the lane's sessions.
func (l *Lane) CloseSession(id string) (wait func(), err error) {
	return l.m.closeSession(l, id)
}

// enter counts an open or fork in; false once the lane is closed.
func (l *Lane) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.opening.Add(1)
	return true
}

// closeSessions closes the lane's sessions (Close has refused new ones):
// each sends session/closed "shutdown" and its runs settle abort msg. It
// returns once their children are gone; the registry then forgets the
// lane's ended ids, which nobody can name any more.
func (l *Lane) closeSessions(msg string) {
	owned := func(s *Session) bool { return s.owner == l }
	const note = "the connection is closing"
	// The first pass ends the sessions a fork under way may wait on; once
	// every open and fork has returned, the second ends those they made.
	l.m.closeSessions(owned, msg, note)
	l.opening.Wait()
	l.m.closeSessions(owned, msg, note)
	l.m.mu.Lock()
	for id, e := range l.m.ended {
		if e.owner == l {
			delete(l.m.ended, id)
		}
	}
	l.m.mu.Unlock()
}

// SessionCount is the number of sessions open (booting ones included), of
// every owner.
func (m *Manager) SessionCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
