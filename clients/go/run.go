package coderun

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// RunOptions are a run's optional params (docs/protocol.md §3.1). The zero
// value runs the program with no bindings, files or callbacks.
type RunOptions struct {
	// Bindings are the program's globals, in order.
	Bindings []Binding
	// Limits tighten the daemon's configured budgets for this run.
	Limits *Limits
	// Files are written into the run's working directory first (§12.1).
	Files []File
	// OnLog receives each change to the run's log as it happens (§5).
	// Setting it or OnOutput asks the daemon to stream.
	OnLog func(LogEvent)
	// OnOutput receives each displayed object as it is displayed (§12.3).
	OnOutput func(Output)
	// Traceparent is the W3C trace context of the caller's span.
	Traceparent string
	// Secrets are credentials the daemon's egress proxy adds to this run's
	// requests to their hosts (docs/containment-secrets.md); not in a
	// session, which has the daemon's.
	Secrets []Secret
}

// Secret is a credential bound to Hosts (patterns within the run's egress):
// exactly one of Header, Query and Env (a variable the program sees
// holding a placeholder, which the proxy replaces with Value). The program
// never sees Value.
type Secret struct {
	Hosts  []string `json:"hosts"`
	Header string   `json:"header,omitempty"`
	Query  string   `json:"query,omitempty"`
	Env    string   `json:"env,omitempty"`
	Value  string   `json:"value"`
}

// Limits are per-run budgets (docs/configuration.md §4); zero leaves the
// configured value. Each may only go below the daemon's configuration.
type Limits struct {
	CPUSeconds     int64 `json:"cpuSeconds,omitempty"`
	MaxWallMs      int64 `json:"maxWallMs,omitempty"`
	AddressSpaceMb int64 `json:"addressSpaceMb,omitempty"`
	MaxLogBytes    int64 `json:"maxLogBytes,omitempty"`
	MaxValueBytes  int64 `json:"maxValueBytes,omitempty"`
	MaxFileBytes   int64 `json:"maxFileBytes,omitempty"`
	MaxOutputBytes int64 `json:"maxOutputBytes,omitempty"`
	MaxDiskMb      int64 `json:"maxDiskMb,omitempty"`
}

// File is a file handed to the run: Data is written at Path, relative to its
// working directory.
type File struct {
	Path string
	Data []byte
}

// MarshalJSON writes the file as {path, base64}.
func (f File) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Path   string `json:"path"`
		Base64 string `json:"base64"`
	}{f.Path, base64.StdEncoding.EncodeToString(f.Data)})
}

// OutFile is a regular file the program left under out/ (§12.2). Data is
// nil when the file was Omitted because the outputs budget ran out.
type OutFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Data    []byte `json:"base64,omitempty"` // encoding/json decodes the base64
	Omitted bool   `json:"omitted,omitempty"`
}

// Output is one displayed object (§12.3): MIME type to its data, base64 for
// binary types and text for text types, as the daemon sent it.
type Output struct {
	Index int               `json:"index"` // its place in Result.Outputs
	Data  map[string]string `json:"data"`
}

// LogEvent is one run/log notification (§5): joining the Text of every event
// with the same Index gives Result.Logs[Index].
type LogEvent struct {
	Index     int    `json:"index"`
	Text      string `json:"text"`
	Continued bool   `json:"continued"`
}

// Stats are a run's measurements (§3.7): the daemon's own type, so the
// client has every member it sends (InstallMs, docs/packages.md, included).
type Stats = protocol.Stats

// EgressEntry is one request the run made through the egress proxy
// (docs/containment.md §6): host, port, method, status, bytes and ms.
type EgressEntry = protocol.EgressEntry

// SessionInfo is a session run's "session" member (§11.1).
type SessionInfo struct {
	ID     string `json:"id"`
	Alive  bool   `json:"alive"`
	Runs   int64  `json:"runs"`
	Reason string `json:"reason,omitempty"`
}

// Result is a settled run (§3.5). Value is the program's value exactly as
// the daemon sent it (nil when the run failed).
type Result struct {
	Value   json.RawMessage `json:"value,omitempty"`
	Logs    []string        `json:"logs"`
	Error   *RunError       `json:"error,omitempty"`
	Stats   Stats           `json:"stats"`
	Outputs []Output        `json:"outputs,omitempty"`
	Files   []OutFile       `json:"files,omitempty"`
	Session *SessionInfo    `json:"session,omitempty"`
	// Egress is the run's requests through the egress proxy; nil when the
	// daemon has no egress policy.
	Egress []EgressEntry `json:"egress,omitempty"`
}

// RunError is a failed run (§3.6): Run returns it as its error, with the
// Result. Kind is one of "exception", "timeout", "abort", "worker-exit",
// "invalid-output", "output-limit".
type RunError struct {
	Kind          string `json:"kind"`
	Message       string `json:"message"`
	ExceptionType string `json:"exceptionType,omitempty"` // exception
	Line          int    `json:"line,omitempty"`          // exception: the program's line, 1-based
	Path          string `json:"path,omitempty"`          // invalid-output
	Hint          string `json:"hint,omitempty"`          // invalid-output
	Budget        string `json:"budget,omitempty"`        // timeout: "cpu" or "wall"
	ExitCode      *int   `json:"exitCode,omitempty"`      // worker-exit
	Signal        string `json:"signal,omitempty"`        // worker-exit

	cause error // the context's error when this client cancelled the run
}

func (e *RunError) Error() string { return "coderun: run failed: " + e.Kind + ": " + e.Message }

// Unwrap is the context's error when the run was cancelled through Run's
// context, so errors.Is(err, context.Canceled) holds.
func (e *RunError) Unwrap() error { return e.cause }

// runParams is a run's params on the wire.
type runParams struct {
	Program     string        `json:"program"`
	Bindings    []bindingDecl `json:"bindings,omitempty"`
	Limits      *Limits       `json:"limits,omitempty"`
	Stream      bool          `json:"stream,omitempty"`
	Files       []File        `json:"files,omitempty"`
	Traceparent string        `json:"traceparent,omitempty"`
	SessionID   string        `json:"sessionId,omitempty"`
	Secrets     []Secret      `json:"secrets,omitempty"`
}

// runState is what the read goroutine needs of a live run.
type runState struct {
	functions map[string]map[string]Function // namespace → name → function
	onLog     func(LogEvent)
	onOutput  func(Output)
}

// Run runs program, the body of an async Python function, and returns its
// result. A program that fails returns the Result and a *RunError; a request
// the daemon refuses returns a *jsonrpc2.Error and no Result. Cancelling ctx
// cancels the run (see the package doc).
func (c *Client) Run(ctx context.Context, program string, opts *RunOptions) (*Result, error) {
	return c.run(ctx, program, "", opts)
}

func (c *Client) run(ctx context.Context, program, sessionID string, opts *RunOptions) (*Result, error) {
	if opts == nil {
		opts = &RunOptions{}
	}
	decls, functions, err := declare(opts.Bindings)
	if err != nil {
		return nil, err
	}
	params := runParams{Program: program, Bindings: decls, Limits: opts.Limits, Files: opts.Files,
		Stream: opts.OnLog != nil || opts.OnOutput != nil, Traceparent: opts.Traceparent, SessionID: sessionID,
		Secrets: opts.Secrets}
	id := c.nextID()
	key := id
	c.mu.Lock()
	c.runs[key] = &runState{functions: functions, onLog: opts.OnLog, onOutput: opts.OnOutput}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.runs, key)
		c.mu.Unlock()
	}()
	w, err := c.conn.DispatchCall(ctx, protocol.MethodRun, params, jsonrpc2.PickID(id))
	if err != nil {
		return nil, c.lost(err)
	}
	var res Result
	err = w.Wait(ctx, &res)
	var cancelled error
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// The daemon answers every run exactly once, a cancelled one with
		// its abort result, so the wait after the cancel ends.
		cancelled = ctx.Err()
		if nerr := c.conn.Notify(context.Background(), protocol.MethodCancelRequest, map[string]any{"id": id}); nerr != nil {
			return nil, c.lost(nerr)
		}
		err = c.waitAborted(w, &res, cancelled)
	}
	if err != nil {
		return nil, c.lost(err)
	}
	if res.Error != nil {
		res.Error.cause = cancelled
		return &res, res.Error
	}
	return &res, nil
}

// abortMargin is how long past its grace the client waits for a cancelled
// run's answer: the daemon kills the program at the grace's end, reaps it and
// writes the result, a few milliseconds on an idle machine.
const abortMargin = 5 * time.Second

// waitAborted waits for a cancelled run's answer, for at most the daemon's
// grace and abortMargin: a daemon that never answers does not hold the
// caller past its cancellation. Then it returns cancelled.
func (c *Client) waitAborted(w jsonrpc2.Waiter, res *Result, cancelled error) error {
	ctx, stop := context.WithTimeout(context.Background(), c.grace+abortMargin)
	defer stop()
	err := w.Wait(ctx, res)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("coderun: the daemon did not answer the cancelled run within %v: %w", c.grace+abortMargin, cancelled)
	}
	return err
}

// liveRun looks up a live run by its id as the daemon wrote it.
func (c *Client) liveRun(runID json.RawMessage) *runState {
	var id jsonrpc2.ID
	if json.Unmarshal(runID, &id) != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}
