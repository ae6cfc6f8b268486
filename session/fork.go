package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child"
	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// forkReplyTimeout bounds a fork from the fork frame's write to the fork's
// adoption: the source's fork, the fork's set-up and its forked frame.
var forkReplyTimeout = 10 * time.Second

// forkReplyMax bounds the fork's reply frame (a real one is < 100 bytes).
const forkReplyMax = 4096

// forkCopyMax bounds the bytes of the source's working directory a fork copies.
var forkCopyMax int64 = 1 << 30

// errForkFailed wraps every reason a fork did not produce a worker.
var errForkFailed = errors.New("session fork failed")

// forkWorker forks src, an idle session child, into dir, an empty run
// directory (rundir.Make), as docs/child-protocol-sessions.md §6.3 says: src's
// working directory is copied into wd through both descriptors (rundir.CopyFD, at most
// forkCopyMax bytes); the fork frame goes out on src's fd 3 with the fork's
// three descriptors and extra (tier sandbox: the fork's Landlock ruleset);
// the reply comes on the fork's own channel; the fork is then adopted from
// src's reaper. The returned worker's boot is done (it is idle, ready for a
// session run frame) and its fd-3 reader is not started. The caller must be
// src's only fd-3 writer meanwhile, and owns wd (it is not removed here).
// Errors wrap errForkFailed; nothing of the fork is left open, and a fork
// that was not adopted exits when its channel closes.
func forkWorker(src *worker, wd *rundir.Dir, extra ...*os.File) (*worker, error) {
	return forkWorkerMax(src, wd, forkCopyMax, nil, extra...)
}

// forkCopyBudget is what a fork of a session under a disk budget of mb MiB
// may copy: no more than the budget (the fork holds the same one, and a
// sparse file copies dense: a source could otherwise make the daemon write
// forkCopyMax bytes per fork under a budget of a few MiB).
func forkCopyBudget(mb int64) int64 {
	if mb > 0 && mb*protocol.MiB < forkCopyMax {
		return mb * protocol.MiB
	}
	return forkCopyMax
}

// forkWorkerMax is forkWorker copying at most maxCopy bytes. With eg (the
// Manager's egress) and a source that has egress credentials, the fork gets
// credentials of its own and the source new ones (forkCredentials), each
// in a proxy frame on its own channel once the fork exists.
func forkWorkerMax(src *worker, wd *rundir.Dir, maxCopy int64, eg *childEgress, extra ...*os.File) (*worker, error) {
	if !src.proc.Adoptable() {
		return nil, fmt.Errorf("%w: %w", errForkFailed, child.ErrNotAdoptable)
	}
	err := src.wd.Do(func(sfd int) error {
		return wd.Do(func(dfd int) error { return rundir.CopyFD(sfd, dfd, maxCopy) })
	})
	if err != nil {
		return nil, fmt.Errorf("%w: copying the working directory: %w", errForkFailed, err)
	}
	ch, err := child.OpenForkChannel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errForkFailed, err)
	}
	deadline := time.Now().Add(forkReplyTimeout)
	cred := eg.forkCredentials(src)
	proc, err := offerFork(src, ch, forkFrame(wd.Path()), deadline, extra)
	cred.rotateSource(src, deadline)
	if err != nil {
		ch.Close()
		return nil, fmt.Errorf("%w: %w", errForkFailed, err)
	}
	ch.Conn.SetReadDeadline(time.Time{})
	w := newWorker(wd, proc)
	w.conn, w.stdout, w.stderr = ch.Conn, ch.Stdout, ch.Stderr
	cred.give(w, src, deadline)
	go w.reap()
	return w, nil
}

// offerFork sends the fork frame, reads the fork's reply and adopts it.
func offerFork(src *worker, ch *child.ForkChannel, frame []byte, deadline time.Time, extra []*os.File) (*child.Process, error) {
	src.conn.SetWriteDeadline(deadline)
	err := ch.Offer(src.conn, frame, extra...)
	src.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("sending the fork frame: %w", err)
	}
	ch.Conn.SetReadDeadline(deadline)
	line, err := readForkReply(ch.Conn)
	if err != nil {
		return nil, err
	}
	reply, ok := wireguard.DecodeForkReply(line)
	switch {
	case !ok:
		return nil, errors.New("the fork's reply is not a forked or fork-failed frame")
	case !reply.Forked:
		return nil, fmt.Errorf("the source could not fork: %s", reply.Message)
	}
	// The pid comes from a channel a program could reach: src's reaper
	// checks that it names an unclaimed fork before adopting it.
	return src.proc.Adopt(reply.Pid)
}

// forkFrame encodes {"type":"fork","dir":…}. It carries no credentials:
// the fork is a copy of the source's memory, frame included.
func forkFrame(dir string) []byte {
	b := append([]byte(nil), `{"type":"`+protocol.FrameFork+`","dir":`...)
	b = wireguard.AppendString(b, dir)
	return append(b, "}\n"...)
}

// proxyFrame encodes {"type":"proxy","url":…}.
func proxyFrame(url string) []byte {
	b := append([]byte(nil), `{"type":"`+protocol.FrameProxy+`","url":`...)
	b = wireguard.AppendString(b, url)
	return append(b, "}\n"...)
}

// sendProxy writes url's proxy frame on conn, an idle child's fd 3, by
// deadline. A frame not delivered leaves the child with credentials no
// grant names: its requests are refused, never billed to another.
func sendProxy(conn *os.File, url string, deadline time.Time) {
	conn.SetWriteDeadline(deadline)
	_, _ = conn.Write(proxyFrame(url))
	conn.SetWriteDeadline(time.Time{})
}

// readForkReply reads the fork's first line (without its newline). The fork
// sends nothing after it until it gets a run frame, so nothing is read past it.
func readForkReply(conn *os.File) ([]byte, error) {
	buf := make([]byte, forkReplyMax)
	n := 0
	for {
		m, err := conn.Read(buf[n:])
		n += m
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return buf[:i], nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the fork's reply: %w", err)
		}
		if n == len(buf) {
			return nil, fmt.Errorf("the fork's reply exceeds %d bytes", forkReplyMax)
		}
	}
}
