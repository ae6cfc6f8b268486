package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// A hostile upstream (docs/mcp.md §2.5): a stdio MCP server written by hand,
// line by line, so that it can do what the SDK's server never would, and
// cheaply: its large answers are streamed, never built in memory, so the
// daemon's memory is the only one that grows.
//
//   - HostileCursor: every tools/list page names another nextCursor, forever
//     (each page one small tool).
//   - HostileTools: 3 000 tools with 16 KiB descriptions, 100 a page.
//   - HostileFatPage: a second page of one tool whose input schema has
//     500 000 properties (14 MB, which a JSON decoder makes ~30 times
//     larger), streamed.
//
// In every mode it also has the tools echo (its "message" back), big ("mb"
// megabytes of text, streamed), fail (a JSON-RPC error whose message is "mb"
// megabytes) and toolfail (an isError result of "mb" megabytes of text).
const (
	HostileCursor  = "cursor"
	HostileTools   = "tools"
	HostileFatPage = "fatpage"
	HostileBig     = "big" // only the tools every mode has
)

const envHostile = "CODERUN_MCPTEST_HOSTILE" // the hostile mode

// HostileEnv is what a command needs to become the hostile server in mode.
func HostileEnv(mode string) map[string]string {
	return map[string]string{envServe: "1", envHostile: mode}
}

// serveHostile answers requests from stdin on stdout until stdin ends.
func serveHostile(mode string, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // stdin ended: the client is gone
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 {
			continue // a notification, or garbage
		}
		if err := answerHostile(w, mode, req.ID, req.Method, req.Params); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func answerHostile(w *bufio.Writer, mode string, id json.RawMessage, method string, params json.RawMessage) error {
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(params, &p)
		return reply(w, id, map[string]any{"protocolVersion": p.ProtocolVersion,
			"capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo":   map[string]any{"name": "hostile", "version": "1"}})
	case "tools/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(params, &p)
		if mode == HostileFatPage && p.Cursor != "" {
			return fatPage(w, id)
		}
		return reply(w, id, hostileList(mode, p.Cursor))
	case "tools/call":
		return hostileCall(w, id, params)
	}
	return reply(w, id, map[string]any{})
}

func reply(w *bufio.Writer, id json.RawMessage, result any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// hostileList is the tools/list page at cursor ("" for the first).
func hostileList(mode, cursor string) map[string]any {
	tools := []map[string]any{
		{"name": "echo", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}},
		{"name": "big", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"mb": map[string]any{"type": "integer"}}}},
		{"name": "fail", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"mb": map[string]any{"type": "integer"}}}},
		{"name": "toolfail", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"mb": map[string]any{"type": "integer"}}}},
	}
	page, _ := strconv.Atoi(cursor)
	total, perPage, descBytes := 0, 0, 0
	switch mode {
	case HostileCursor:
		total, perPage, descBytes = -1, 1, 100
	case HostileTools:
		total, perPage, descBytes = 3000, 100, 16<<10
	}
	if mode == HostileFatPage {
		return map[string]any{"tools": tools, "nextCursor": "1"}
	}
	if total == 0 {
		return map[string]any{"tools": tools}
	}
	if cursor != "" {
		tools = nil
	}
	for i := page * perPage; i < (page+1)*perPage && (total < 0 || i < total); i++ {
		tools = append(tools, map[string]any{"name": "h" + strconv.Itoa(i), "description": strings.Repeat("d", descBytes),
			"inputSchema": map[string]any{"type": "object"}})
	}
	res := map[string]any{"tools": tools}
	if total < 0 || (page+1)*perPage < total {
		res["nextCursor"] = strconv.Itoa(page + 1)
	}
	return res
}

// fatPage writes the tools/list page of one tool whose input schema has
// 500 000 string properties.
func fatPage(w *bufio.Writer, id json.RawMessage) error {
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"fat","inputSchema":{"type":"object","properties":{`, id)
	for i := range 500000 {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, `"p%d":{"type":"string"}`, i)
	}
	_, err := w.WriteString("}}}]}}\n")
	return err
}

// hostileCall answers tools/call: echo, or big streamed in 1 MiB writes.
func hostileCall(w *bufio.Writer, id json.RawMessage, params json.RawMessage) error {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Message string `json:"message"`
			MB      int    `json:"mb"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	switch p.Name {
	case "big":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id)
	case "fail": // a JSON-RPC error whose message is mb MiB
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"`, id)
	case "toolfail": // an isError result whose text is mb MiB
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"isError":true,"content":[{"type":"text","text":"`, id)
	default:
		return reply(w, id, map[string]any{"content": []map[string]any{{"type": "text", "text": p.Arguments.Message}}})
	}
	mb := strings.Repeat("x", 1<<20)
	for range p.Arguments.MB {
		if _, err := w.WriteString(mb); err != nil {
			return err
		}
	}
	tail := "\"}]}}\n"
	if p.Name == "fail" {
		tail = "\"}}\n"
	}
	_, err := w.WriteString(tail)
	return err
}

// maybeServeHostile serves as the hostile server when asked to, then exits.
func maybeServeHostile() {
	mode := os.Getenv(envHostile)
	if mode == "" {
		return
	}
	if err := serveHostile(mode, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest hostile:", err)
	}
	os.Exit(0)
}
