package coderun

import (
	"context"
	"encoding/json"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Session is a persistent session (docs/protocol.md §11): one interpreter
// whose runs share their globals. Its methods are safe for concurrent use;
// its runs execute one at a time in arrival order.
type Session struct {
	c  *Client
	ID string
}

// SessionOptions are session/open's optional params.
type SessionOptions struct {
	// Limits become the defaults of the session's runs; AddressSpaceMb is
	// fixed for the session's life.
	Limits *Limits `json:"limits,omitempty"`
	// IdleTimeoutMs ends the session after that long without a run (at most
	// the daemon's CODERUN_SESSION_IDLE_MS; zero: that value).
	IdleTimeoutMs int64 `json:"idleTimeoutMs,omitempty"`
	// Secrets are credentials the egress proxy adds to every run of the
	// session (as RunOptions.Secrets).
	Secrets []Secret `json:"secrets,omitempty"`
}

type sessionRef struct {
	SessionID string `json:"sessionId"`
}

// OpenSession opens a session. A daemon at its session cap refuses with
// *jsonrpc2.Error code -32003.
func (c *Client) OpenSession(ctx context.Context, opts *SessionOptions) (*Session, error) {
	if opts == nil {
		opts = &SessionOptions{}
	}
	var ref sessionRef
	if err := c.call(ctx, protocol.MethodSessionOpen, opts, &ref); err != nil {
		return nil, err
	}
	return &Session{c: c, ID: ref.SessionID}, nil
}

// Run runs program in the session, after the session's earlier runs. The
// result's Session says whether the session is still alive.
func (s *Session) Run(ctx context.Context, program string, opts *RunOptions) (*Result, error) {
	return s.c.run(ctx, program, s.ID, opts)
}

// Fork copies the session, once its earlier runs are done, into a new one
// that sees exactly the state they left (§11.5).
func (s *Session) Fork(ctx context.Context) (*Session, error) {
	var ref sessionRef
	if err := s.c.call(ctx, protocol.MethodSessionFork, sessionRef{s.ID}, &ref); err != nil {
		return nil, err
	}
	return &Session{c: s.c, ID: ref.SessionID}, nil
}

// Close ends the session; it returns once its interpreter and every process
// it started are gone.
func (s *Session) Close(ctx context.Context) error {
	return s.c.call(ctx, protocol.MethodSessionClose, sessionRef{s.ID}, nil)
}

// Describe returns the Python stubs of bindings under limits, the text a
// model reads before it writes a program (bindings/describe, §10.4).
func (c *Client) Describe(ctx context.Context, bindings []Binding, limits *Limits) (string, error) {
	decls, _, err := declare(bindings)
	if err != nil {
		return "", err
	}
	var out struct {
		Stubs string `json:"stubs"`
	}
	params := struct {
		Bindings []bindingDecl `json:"bindings"`
		Limits   *Limits       `json:"limits,omitempty"`
	}{decls, limits}
	err = c.call(ctx, protocol.MethodDescribe, params, &out)
	return out.Stubs, err
}

// Discover returns the daemon's OpenRPC 1.3 description of its JSON-RPC
// surface (rpc.discover), as the daemon wrote it.
func (c *Client) Discover(ctx context.Context) (json.RawMessage, error) {
	var doc json.RawMessage
	err := c.call(ctx, protocol.MethodDiscover, nil, &doc)
	return doc, err
}

// Call sends any request of the daemon's surface (docs/openrpc.json) and
// decodes its result into result (a *json.RawMessage keeps it exact). Run,
// the sessions' methods and Describe are the typed forms; Call is for a
// method they do not cover.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result)
}
