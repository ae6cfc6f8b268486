// Package mcp is `coderun-rpc mcp`: a Model Context Protocol server on stdio
// (the official Go SDK) with the tools run_python and close_python_session
// (docs/mcp.md). A run goes through the same session manager, checks and
// result encoding as the JSON-RPC daemon's, and run_python's "session" names
// a persistent session of that manager, owned by the MCP connection
// (sessions.go); every configured upstream server
// (package mcp/upstream) is a global of every run, and run_python's
// description carries the stubs of all their tools, so a model sees the whole
// API in the tool list.
package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wire"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure Serve; main builds them from the daemon's configuration.
type Options struct {
	Manager       *session.Manager
	Pool          *upstream.Pool // the upstream servers (may be empty)
	Limits        protocol.Limits
	Packages      wheelset.AllowList // what run_python's "packages" may name
	PythonVersion string
	Version       string
	Logger        *slog.Logger
	// Builtins and Modules are the interpreter's builtins and
	// standard-library modules (config.ProbeNames): a server whose global is
	// one of them is refused.
	Builtins, Modules map[string]bool
	// Egress is the daemon's egress policy (nil: none), named in run_python's
	// description; runs follow it through the Manager.
	Egress *egress.Policy
}

// Server is one code-mode MCP server.
type Server struct {
	opts Options
	log  *slog.Logger
	sdk  *sdk.Server
	nss  []protocol.Namespace // one unresolved mcp binding per upstream

	mu       sync.Mutex
	desc     string                       // run_python's description as last registered
	seq      uint64                       // run ids
	conns    map[*sdk.ServerSession]*conn // named sessions per MCP connection (sessions.go)
	watchers sync.WaitGroup               // one per connection with names: closes them at its end
	served   bool                         // Serve is returning: no new connection gets names
}

// New checks the upstream globals (a reserved word, a builtin's or a
// standard module's name is refused, naming the server) and registers the
// tools.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkGlobals(opts.Pool, opts.Builtins, opts.Modules); err != nil {
		return nil, err
	}
	nss, err := wire.MCPNamespaces(opts.Pool)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, nss: nss, conns: map[*sdk.ServerSession]*conn{}}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "coderun-rpc", Version: opts.Version},
		&sdk.ServerOptions{Logger: opts.Logger})
	s.sdk.AddTool(closeTool, s.closeSession)
	s.desc = runIntro // with upstreams, replaced before any tools/list is answered (refreshOnList)
	if !s.configured() {
		s.desc = s.describe(nil, "")
	}
	s.sdk.AddTool(runTool(s.desc), s.runPython)
	s.sdk.AddReceivingMiddleware(s.refreshOnList)
	// An upstream's new tool list reaches the host at once: the description is
	// replaced, which sends it tools/list_changed.
	opts.Pool.OnToolsChanged(func() { s.refresh(context.Background()) })
	return s, nil
}

// Serve serves one client on t until it goes away or ctx ends; every run
// still going is then cancelled, and Serve returns once the client's named
// sessions are closed and their processes gone.
func (s *Server) Serve(ctx context.Context, t sdk.Transport) error {
	err := s.sdk.Run(ctx, t)
	s.mu.Lock()
	s.served = true
	s.mu.Unlock()
	s.watchers.Wait()
	return err
}

// refreshOnList brings run_python's description up to date before a
// tools/list is answered: the upstream tools are listed (cached after the
// first time) and their stubs rendered (cached while nothing changes).
func (s *Server) refreshOnList(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "tools/list" {
			s.refresh(ctx)
		}
		return next(ctx, method, req)
	}
}

func (s *Server) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.opts.Limits.MaxWallMs)*time.Millisecond)
	defer cancel()
	nss, _, notes := s.resolve(ctx)
	desc := s.describe(nss, notes)
	s.mu.Lock()
	changed := desc != s.desc
	s.desc = desc
	s.mu.Unlock()
	if changed { // replacing the tool tells connected clients the list changed
		s.sdk.AddTool(runTool(desc), s.runPython)
	}
}

// configured: the daemon has upstream servers.
func (s *Server) configured() bool { return len(s.nss) > 0 }

// checkGlobals refuses a server whose global a program would lose, or
// that would hide something, without meaning to: a standard-library
// module's name (a program's "import time" rebinds the global "time"), a
// builtin's (the server would hide "map" from every program), or that of
// the error class every tool raises (McpToolError).
func checkGlobals(pool *upstream.Pool, builtins, modules map[string]bool) error {
	for _, srv := range pool.Servers() {
		key, global := srv.Spec().Key, srv.Spec().Global
		rename := "rename the server in the MCP config file (e.g. " + strconv.Quote(global+"_server") + ")"
		switch {
		case modules[global]:
			return fmt.Errorf("mcp server %q: its global %q is also the name of a standard-library module, and a program's \"import %s\" would hide the server; %s",
				key, global, global, rename)
		case builtins[global]:
			return fmt.Errorf("mcp server %q: its global %q would hide Python's builtin %s from every program; %s",
				key, global, global, rename)
		case global == upstream.ErrorClassName:
			return fmt.Errorf("mcp server %q: its global %q would hide the error class every MCP tool raises; %s",
				key, global, rename)
		}
	}
	return nil
}

// resolve reaches every upstream and returns the namespaces of those that
// answered, their routes, and a note per server that did not or whose tools
// a cap cut.
func (s *Server) resolve(ctx context.Context) ([]protocol.Namespace, map[string]*upstream.Server, string) {
	var nss []protocol.Namespace
	routes := map[string]*upstream.Server{}
	notes := ""
	for _, ns := range s.nss {
		one := []protocol.Namespace{ns}
		r, cuts, err := wire.ResolveMCP(ctx, s.opts.Pool, one)
		if err != nil {
			notes += "\n# unavailable: " + commentLine(err.Error())
			continue
		}
		notes += cuts
		nss = append(nss, one[0])
		routes[ns.Global] = r[ns.Global]
	}
	return nss, routes, notes
}

// commentLine is text fit for one line of the description's Python comment:
// every character Python's str.splitlines (or a reader) takes for a line
// break becomes a space, so an upstream's error text cannot start a line of
// stub of its own.
func commentLine(text string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			return ' '
		}
		return r
	}, text)
}
