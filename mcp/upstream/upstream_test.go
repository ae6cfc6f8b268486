package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"github.com/coderun-rpc/coderun-rpc/internal/mcptest"
	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/typed"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServe() // this binary is also the upstream server (habit 9)
	os.Exit(leakcheck.Suite(m))
}

// pool is one upstream server "test-server": this test binary re-executed
// as mcptest's server with env.
func pool(t *testing.T, env map[string]string) (*upstream.Pool, *upstream.Server) {
	t.Helper()
	spec := upstream.Spec{Key: "test-server", Global: "test_server", Command: os.Args[0], Env: env}
	p := upstream.NewPool([]upstream.Spec{spec}, "test", nil, upstream.TestCaps)
	t.Cleanup(p.Close)
	return p, p.Server("test-server")
}

func call(t *testing.T, s *upstream.Server, tool, args string) (string, error) {
	t.Helper()
	// A bound against a hang only: a 17 MB result under -race on a loaded
	// machine has taken over a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	v, err := s.Call(ctx, tool, []byte(args), nil)
	return string(v), err
}

func TestToolsAndResults(t *testing.T) {
	leakcheck.Check(t)
	_, s := pool(t, mcptest.Env(0, ""))
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, fn := range tools.Functions {
		names[fn.Name] = true
		if !fn.Typed {
			t.Errorf("tool %s was not compiled as a typed function", fn.Name)
		}
	}
	for _, n := range []string{"echo", "add", "get-sum", "get_sum", "hang", "big"} {
		if !names[n] {
			t.Errorf("function %q missing from %v", n, names)
		}
	}
	if got := tools.Tool("get_sum"); got != "get-sum" {
		t.Errorf("get_sum calls %q, want get-sum", got)
	}
	if got := tools.Tool("nope"); got != "nope" {
		t.Errorf("nope calls %q, want nope itself (for the server to refuse)", got)
	}
	cases := []struct{ tool, args, want string }{
		{"add", `{"a":1,"b":2}`, `{"sum":3}`},                // structuredContent
		{"exact", `{}`, `{"n":9007199254740993}`},            // as sent: no float64 on the way
		{"echo", `{"message":"hi \"you\""}`, `"hi \"you\""`}, // a single text item's text
		{"mixed", `{}`, `[{"type":"image","mimeType":"image/png","data":"iVBORw=="},{"type":"text","text":"a picture"}]`},
		{"roots", `{}`, `"0 roots"`}, // the server asks for input first: answered, then retried
	}
	for _, c := range cases {
		got, err := call(t, s, c.tool, c.args)
		if err != nil || got != c.want {
			t.Errorf("%s(%s) = %s, %v; want %s", c.tool, c.args, got, err, c.want)
		}
	}
	checkMeta(t, s)
	_, err = call(t, s, "fail", `{}`)
	var te *upstream.ToolError
	if !errors.As(err, &te) || te.Tool != "fail" || te.Server != "test-server" || !strings.Contains(te.Message, "failed on purpose") {
		t.Errorf("fail: %#v, want a ToolError with the tool's text", err)
	}
}

// checkMeta: a call carries the per-request _meta of the protocol revision
// the session negotiated (2026-07-28 with this SDK on stdio), as the SDK's own
// requests do.
func checkMeta(t *testing.T, s *upstream.Server) {
	t.Helper()
	got, err := call(t, s, "meta", `{}`)
	var meta map[string]any
	if err == nil {
		err = json.Unmarshal([]byte(got), &meta)
	}
	info, _ := meta["io.modelcontextprotocol/clientInfo"].(map[string]any)
	if err != nil || meta["io.modelcontextprotocol/protocolVersion"] == nil || info["name"] != "coderun-rpc" {
		t.Errorf("meta: %s, %v; want the protocol version and the client's info", got, err)
	}
}

// TestServerFaults: a server that exits mid-call, a call that hangs until
// cancelled, a result larger than the SDK's own line cap. The tools are
// listed first, as the daemon always does before a call.
func TestServerFaults(t *testing.T) {
	leakcheck.Check(t)
	mark := filepath.Join(t.TempDir(), "cancelled")
	_, s := pool(t, mcptest.Env(0, mark))
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}

	_, err := call(t, s, "exit", `{}`) // exits mid-call
	var se *upstream.ServerError
	if !errors.As(err, &se) || se.Server != "test-server" {
		t.Fatalf("exit: %v, want a ServerError naming the server", err)
	}
	if got, err := call(t, s, "echo", `{"message":"again"}`); err != nil || got != `"again"` {
		t.Fatalf("the call after the server exited: %s, %v; want a fresh server", got, err)
	}
	if _, err := s.Tools(context.Background()); err != nil { // the fresh server's listing
		t.Fatal(err)
	}

	// Cancelled once its handler runs, not after a fixed time: the server drops
	// a request cancelled before its handler starts, as a server held off the
	// CPU on a loaded machine would see it, and mark would never appear.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hung := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, "hang", []byte(`{}`), nil)
		hung <- err
	}()
	waitFor(t, mark+".started")
	cancel()
	err = <-hung
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("hang: %v, want a cancelled call naming the server", err)
	}
	waitFor(t, mark) // the SDK told the server: its handler saw the cancel

	mb := 17 // past the SDK's default 16 MiB line cap, which this package raises
	if os.Getenv("CODERUN_TEST_HEAVY") == "1" {
		mb = 50
	}
	got, err := call(t, s, "big", `{"mb":`+strconv.Itoa(mb)+`}`)
	if err != nil || len(got) < mb<<20 {
		t.Fatalf("big: %d bytes, %v; want the whole %d MB text", len(got), err, mb)
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func TestServerThatCannotStart(t *testing.T) {
	leakcheck.Check(t)
	_, s := pool(t, mcptest.FailStartEnv())
	_, err := s.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `mcp server "test-server": cannot start`) {
		t.Fatalf("got %v, want an error naming the server", err)
	}
	p := upstream.NewPool([]upstream.Spec{{Key: "nowhere", Global: "nowhere", Command: "/nonexistent/server"}}, "test", nil, upstream.TestCaps)
	defer p.Close()
	_, err = p.Server("nowhere").Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), `mcp server "nowhere": cannot start`) {
		t.Fatalf("got %v, want an error naming the server", err)
	}
}

func TestManyTools(t *testing.T) {
	leakcheck.Check(t)
	_, s := pool(t, mcptest.Env(500, ""))
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tools.Functions); n < 500 {
		t.Fatalf("%d functions, want the 500 extra tools and the fixed ones", n)
	}
	again, _ := s.Tools(context.Background())
	if again != tools {
		t.Error("the second listing was not served from the cache")
	}
}

// A streamable-HTTP upstream: reached at its URL, with the file's headers
// (a ${VAR} expanded from the environment given) on every request.
func TestStreamableHTTPServer(t *testing.T) {
	leakcheck.Check(t)
	var mu sync.Mutex
	var auth []string
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.New(0, "") }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	specs, err := upstream.ParseConfig("f.json", []byte(`{"mcpServers": {"web": {"url": "`+srv.URL+`",
		"headers": {"Authorization": "Bearer ${TOKEN}"}}}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	p := upstream.NewPool(specs, "test", nil, upstream.TestCaps)
	defer p.Close()
	got, err := call(t, p.Server("web"), "add", `{"a":40,"b":2}`)
	if err != nil || got != `{"sum":42}` {
		t.Fatalf("add over HTTP: %s, %v", got, err)
	}
	if got, err := call(t, p.Server("web"), "roots", `{}`); err != nil || got != `"0 roots"` {
		t.Fatalf("roots over HTTP: %s, %v", got, err)
	}
	// Over HTTP the SDK decodes the result: its numbers pass through a float64
	// (docs/mcp.md §2.4).
	if got, err := call(t, p.Server("web"), "exact", `{}`); err != nil || got != `{"n":9007199254740992}` {
		t.Fatalf("exact over HTTP: %s, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auth {
		if a != "Bearer s3cret" {
			t.Fatalf("a request carried Authorization %q, want the expanded header", a)
		}
	}
	if len(auth) == 0 {
		t.Fatal("no request reached the server")
	}
}

// start is Start with its outcome on a channel; it fails the test when Start
// does not take the call.
func start(t *testing.T, ctx context.Context, s *upstream.Server, function, args string) chan string {
	t.Helper()
	out := make(chan string, 1)
	ok := s.Start(ctx, function, []byte(args), upstream.NewBudget(1<<20), func(v []byte, err error) {
		if err != nil {
			out <- "error: " + err.Error()
			return
		}
		out <- string(v)
	})
	if !ok {
		t.Fatalf("Start did not take %s", function)
	}
	return out
}

// TestStart: once the tools are listed, Start sends a call and hands its
// outcome over later: a value, the retried answer of a tool that asks for
// input first, a server that exits mid-call (the next call starts it afresh),
// and a hanging call cancelled upstream when its context ends.
func TestStart(t *testing.T) {
	leakcheck.Check(t)
	mark := filepath.Join(t.TempDir(), "cancelled")
	_, s := pool(t, mcptest.Env(0, mark))
	ctx := context.Background()
	if s.Start(ctx, "echo", nil, upstream.NewBudget(1<<20), func([]byte, error) { t.Error("called") }) {
		t.Fatal("Start took a call before the tools were listed")
	}
	if _, err := s.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ function, want string }{
		{"get_sum", `{"sum":3}`}, // the binding's name of tool get-sum
		{"roots", `"0 roots"`},
		{"exit", `error: mcp server "test-server": tool "exit": connection closed`},
	} {
		if got := <-start(t, ctx, s, c.function, `{"a":1,"b":2}`); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s, want %s", c.function, got, c.want)
		}
	}
	if got, err := call(t, s, "echo", `{"message":"back"}`); err != nil || got != `"back"` {
		t.Fatalf("after the exit: %s, %v", got, err)
	}
	if _, err := s.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithCancel(ctx)
	start(t, hctx, s, "hang", `{}`)
	waitFor(t, mark+".started")
	cancel()
	waitFor(t, mark)
}

// A listing stops at each cap and says so: pages (a server whose every page
// names another cursor), tools, stub bytes. What was kept is callable.
func TestListingCaps(t *testing.T) {
	leakcheck.Check(t)
	for _, c := range []struct {
		mode string
		caps func(*upstream.Caps)
		n    int
		cut  string
	}{
		{mcptest.HostileCursor, func(c *upstream.Caps) { c.MaxPages = 3 }, 7, "tools omitted: those after page 3 (cap CODERUN_MCP_MAX_PAGES=3)"},
		{mcptest.HostileTools, func(c *upstream.Caps) { c.MaxTools = 5 }, 5, "tools omitted: 99 and those on later pages (cap CODERUN_MCP_MAX_TOOLS=5)"},
		{mcptest.HostileTools, func(c *upstream.Caps) { c.MaxStubBytes = 256 << 10 }, 19, "tools omitted: 85 and those on later pages (cap CODERUN_MCP_MAX_STUB_BYTES=262144)"},
		{mcptest.HostileFatPage, func(*upstream.Caps) {}, 4, "tools omitted: those from page 2 on (a tools/list page exceeds 8454144 bytes (8 × CODERUN_MCP_MAX_STUB_BYTES + 64 KiB))"},
	} {
		caps := upstream.TestCaps
		c.caps(&caps)
		p := upstream.NewPool([]upstream.Spec{{Key: "h", Global: "h", Command: os.Args[0], Env: mcptest.HostileEnv(c.mode)}}, "test", nil, caps)
		tools, err := p.Server("h").Tools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(tools.Functions) != c.n || tools.Cut != `mcp server "h": `+c.cut {
			t.Errorf("%s: %d functions, cut %q; want %d and %q", c.mode, len(tools.Functions), tools.Cut, c.n, c.cut)
		}
		if got, err := call(t, p.Server("h"), "echo", `{"message":"kept"}`); got != `"kept"` {
			t.Errorf("%s: echo %s %v", c.mode, got, err)
		}
		p.Close()
	}
}

// A cached list serves at once while a fresh one is listed in the
// background: when the server says its tools changed, and when the list is
// older than ToolsTTL. The new list replaces it and OnToolsChanged is told.
func TestListingRefreshedInBackground(t *testing.T) {
	leakcheck.Check(t)
	for _, ttl := range []time.Duration{time.Hour, time.Nanosecond} {
		caps := upstream.TestCaps
		caps.ToolsTTL = ttl
		p := upstream.NewPool([]upstream.Spec{{Key: "s", Global: "s", Command: os.Args[0], Env: mcptest.Env(0, "")}}, "test", nil, caps)
		changed := make(chan struct{}, 16)
		p.OnToolsChanged(func() { changed <- struct{}{} })
		s := p.Server("s")
		first, err := s.Tools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := call(t, s, "grow", `{}`); err != nil {
			t.Fatal(err)
		}
		if ttl == time.Nanosecond { // the server's notice is not needed: age alone lists again
			if again, _ := s.Tools(context.Background()); again != first {
				t.Errorf("ttl %v: a stale list was not served at once", ttl)
			}
		}
		select {
		case <-changed:
		case <-time.After(time.Minute):
			t.Fatalf("ttl %v: no new list", ttl)
		}
		now, _ := s.Tools(context.Background())
		if !slices.ContainsFunc(now.Functions, func(f *typed.Function) bool { return f.Name == "grown" }) {
			t.Errorf("ttl %v: the new list lacks the new tool", ttl)
		}
		p.Close()
	}
}
