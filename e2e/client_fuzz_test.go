package e2e

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzClientStream: a hostile client against the real daemon over its stdio.
// The input is split on NUL into up to 12 messages, each framed
// with a correct Content-Length (header faults end the daemon by design and
// are fuzzed in rpc.FuzzFrames). The first byte of a piece picks its shape:
// even → the rest is the raw body; odd → a request with a fresh id whose
// method is picked by the second byte and whose params are the rest (raw).
//
// Property: the daemon never panics or dies, every message it writes is a
// well-formed JSON-RPC 2.0 object, and every readable request (a JSON object
// with a string method and a string or non-negative integer id) gets exactly
// one answer with its id. `go test` runs the seeds; `make test-fuzz` (which
// runs every Fuzz target for FUZZTIME) and `go test -fuzz FuzzClientStream
// ./e2e` explore. Each input costs one daemon start (~0.2 s): about 5
// inputs/s, and the fuzz progress line advances in batches.
func FuzzClientStream(f *testing.F) {
	seeds := [][]byte{
		[]byte("\x01r{\"program\":\"return await t.f(1)\",\"bindings\":[{\"global\":\"t\",\"functions\":[\"f\"]}],\"stream\":true}\x00\x01c{\"id\":1}" +
			"\x00\x00{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"nope\"}\x00\x00{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"run\",\"params\":{\"program\":\"return 2\"}}" +
			"\x00\x00{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"run\",\"params\":{\"program\":\"print('\\ud800')\"}}" +
			"\x00\x00{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"run\",\"params\":{\"program\":\"\xff\"}}"),
		[]byte("\x00[1,2]\x00\x00\"s\"\x00\x00{\x00\x00{\"id\":-1,\"method\":\"run\"}\x00\x00{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":1}" +
			"\x00\x01r{\"program\":\"return 1\",\"limits\":{\"maxWallMs\":-1}}\x00\x01r{\"program\":7}\x00\x01r[1]\x00\x01r{\"bindings\":[{\"global\":\"def\"}]}"),
		[]byte("\x01r{\"program\":\"return 1\"}\x00\x01i\x00\x01s\x00\x01r{\"program\":\"return 3\"}\x00\x01e"),
	}
	for _, s := range seeds {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		pieces := bytes.SplitN(data, []byte{0}, 13)
		if len(pieces) > 12 {
			pieces = pieces[:12]
		}
		d := started(t, map[string]string{"CODERUN_MAX_WALL_MS": "2000", "CODERUN_GRACE_MS": "100", "CODERUN_WARM_POOL": "0",
			"CODERUN_LOG_LEVEL": "error"})
		want := map[string]int{"1001": 1} // canonical id → readable requests sent (1001: started's initialize)
		methods := []string{"run", "initialize", "shutdown", "nope", "$/cancelRequest", "exit", "initialized", "run"}
		for i, p := range pieces {
			var body string
			if len(p) > 0 && p[0]%2 == 1 {
				method := methods[0]
				if len(p) > 1 {
					method = methods[int(p[1])%len(methods)]
					p = p[1:]
				}
				body = `{"jsonrpc":"2.0","id":"f` + strconv.Itoa(i) + `","method":"` + method + `","params":` + string(p[1:]) + `}`
			} else if len(p) > 0 {
				body = string(p[1:])
			}
			if isExitNotification(body) {
				continue // ends the daemon by design
			}
			if id, ok := readableID(body); ok {
				want[id]++
			}
			d.send(body)
		}
		d.send(`{"jsonrpc":"2.0","id":"sentinel","method":"nope"}`)
		want[`"sentinel"`]++
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := answers(t, d)
			done := true
			for id, n := range want {
				if got[id] < n {
					done = false
				}
			}
			if done {
				break
			}
			select {
			case <-d.exited:
				t.Fatalf("the daemon exited (code %d); wanted answers %v, got %v; stderr:\n%s", d.exitCode, want, got, d.stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("answers %v, want %v; input %q", got, want, data)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // a second answer would show by now
		for id, n := range answers(t, d) {
			if id != "null" && n != want[id] {
				t.Errorf("id %s answered %d times, want %d", id, n, want[id])
			}
		}
	})
}

func isExitNotification(body string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return false
	}
	_, hasID := m["id"]
	return !hasID && string(m["method"]) == `"exit"`
}

// readableID returns the canonical form of a readable request's id.
func readableID(body string) (string, bool) {
	if !utf8.ValidString(body) || !json.Valid([]byte(body)) {
		return "", false
	}
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader([]byte(body)))
	if d.Decode(&m) != nil || d.More() || m == nil {
		return "", false
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil {
		return "", false
	}
	return canonicalID(m["id"])
}

func canonicalID(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		b, _ := json.Marshal(s)
		return string(b), true
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil || n > math.MaxInt64 {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}

// answers counts the daemon's responses by canonical id, checking each is
// a well-formed JSON-RPC 2.0 response.
func answers(t *testing.T, d *daemon) map[string]int {
	got := map[string]int{}
	for _, e := range d.snapshot() {
		if e.m.Method != "" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e.m.raw, &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
			t.Errorf("malformed message %q", e.m.raw)
			continue
		}
		_, hasR := m["result"]
		_, hasE := m["error"]
		if hasR == hasE {
			t.Errorf("a response needs exactly one of result and error: %q", e.m.raw)
		}
		if string(m["id"]) == "null" {
			got["null"]++
			continue
		}
		id, ok := canonicalID(m["id"])
		if !ok {
			t.Errorf("response id %s is not a request id", m["id"])
		}
		got[id]++
	}
	return got
}
