// Package mcptest is an upstream MCP server for tests and the benchmark,
// built on the official Go SDK, with a tool for each fault the daemon must
// survive: one that hangs, one that exits mid-call, one that returns 50 MB,
// one that fails, one that changes the tool list, one whose schema makes a
// check exponential unless bounded, names that are not identifiers, and as
// many extra tools as asked; and a hostile server (hostile.go) that does what
// the SDK's never would. A test binary becomes the server by calling MaybeServe first in
// TestMain and starting itself with Env.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment of a test binary started as the server.
const (
	envServe = "CODERUN_MCPTEST_SERVE"    // "1": serve on stdio
	envTools = "CODERUN_MCPTEST_TOOLS"    // extra tools t0 … tN-1
	envFail  = "CODERUN_MCPTEST_FAIL"     // "start": exit 1 before answering
	envMark  = "CODERUN_MCPTEST_CANCELED" // a file the hang tool creates when cancelled
)

// Env is what a command needs to become the server: extra tools, and a
// path the hang tool creates once its call is cancelled ("" for neither).
func Env(tools int, cancelMark string) map[string]string {
	return map[string]string{envServe: "1", envTools: strconv.Itoa(tools), envMark: cancelMark}
}

// FailStartEnv makes the server exit at once, so it never answers.
func FailStartEnv() map[string]string { return map[string]string{envServe: "1", envFail: "start"} }

// MaybeServe serves on stdio and exits when this process was started as the
// server; otherwise it returns at once.
func MaybeServe() {
	if os.Getenv(envServe) != "1" {
		return
	}
	if os.Getenv(envFail) == "start" {
		fmt.Fprintln(os.Stderr, "mcptest: refusing to start")
		os.Exit(1)
	}
	maybeServeHostile()
	n, _ := strconv.Atoi(os.Getenv(envTools))
	err := New(n, os.Getenv(envMark)).Run(context.Background(), &sdk.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
	}
	os.Exit(0)
}

// New is the server with its fault tools and extra tools t0 … t(n-1).
func New(extra int, cancelMark string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo a message back."}, echo)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two integers."}, add)
	sdk.AddTool(s, &sdk.Tool{Name: "get-sum", Description: "Add two integers, named with a dash."}, add)
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: anyObject}, fail)
	s.AddTool(&sdk.Tool{Name: "exit", Description: "Exits the server mid-call.", InputSchema: anyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { os.Exit(3); return nil, nil })
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Never answers.", InputSchema: anyObject}, hang(cancelMark))
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Returns a text of mb megabytes."}, big)
	s.AddTool(&sdk.Tool{Name: "mixed", Description: "Returns an image and a text.", InputSchema: anyObject}, mixed)
	s.AddTool(&sdk.Tool{Name: "roots", Description: "Asks the client for its roots first.", InputSchema: anyObject}, roots)
	s.AddTool(&sdk.Tool{Name: "meta", Description: "Returns the request's _meta.", InputSchema: anyObject}, meta)
	s.AddTool(&sdk.Tool{Name: "exact", Description: "Returns 2^53 + 1.", InputSchema: anyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: json.RawMessage(`{"n":9007199254740993}`), Content: []sdk.Content{}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "grow", Description: "Adds the tool grown (the list changes).", InputSchema: anyObject},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "grown", Description: "Added by grow."}, echo)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "nested", Description: "Takes x, nested lists of strings; its schema's two list alternatives both recurse.",
		InputSchema: nestedLists}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "nested"}}}, nil
	})
	for i := range extra {
		sdk.AddTool(s, &sdk.Tool{Name: "t" + strconv.Itoa(i), Description: "Extra tool " + strconv.Itoa(i) + "."}, echo)
	}
	return s
}

var anyObject = map[string]any{"type": "object"}

// nestedLists is a schema whose check of x nested d deep around a number
// (both list alternatives fail at the leaf) tries 2^d paths, unless bounded.
var nestedLists = json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/v"}},"$defs":{"v":{"anyOf":[` +
	`{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"array","items":{"$ref":"#/$defs/v"},"minItems":1},` +
	`{"type":"string"}]}}}`)

type message struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

func echo(_ context.Context, _ *sdk.CallToolRequest, in message) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
}

type pair struct {
	A int64 `json:"a"`
	B int64 `json:"b"`
}

type sum struct {
	Sum int64 `json:"sum"`
}

func add(_ context.Context, _ *sdk.CallToolRequest, in pair) (*sdk.CallToolResult, sum, error) {
	return nil, sum{in.A + in.B}, nil
}

func fail(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "fail: it failed on purpose"}}}, nil
}

// hang answers only when cancelled, and then creates mark; it creates
// mark + ".started" first, so a test can cancel a call its handler runs (the
// server drops a request cancelled before its handler starts).
func hang(mark string) sdk.ToolHandler {
	return func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if mark != "" {
			_ = os.WriteFile(mark+".started", nil, 0o600)
		}
		<-ctx.Done()
		if mark != "" {
			_ = os.WriteFile(mark, []byte("cancelled\n"), 0o600)
		}
		return nil, ctx.Err()
	}
}

type size struct {
	MB int `json:"mb"`
}

func big(_ context.Context, _ *sdk.CallToolRequest, in size) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", in.MB<<20)}}}, nil, nil
}

func mixed(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	return &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
		&sdk.TextContent{Text: "a picture"},
	}}, nil
}

// roots asks for the client's roots in a multi-round-trip result (protocol
// 2026-07-28), then answers with how many came back.
func roots(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	answer, ok := req.Params.InputResponses["roots"].(*sdk.ListRootsResult)
	if !ok {
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"roots": &sdk.ListRootsParams{}}}, nil
	}
	text := fmt.Sprintf("%d roots", len(answer.Roots))
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil
}

// meta returns the request's _meta as its structured content.
func meta(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	return &sdk.CallToolResult{StructuredContent: req.Params.Meta, Content: []sdk.Content{}}, nil
}
