package mcp

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// guard passes JSON-RPC lines through unchanged, in order, and answers each
// other non-blank line with one parse error naming what is wrong.
func TestGuard(t *testing.T) {
	leakcheck.Check(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`garbage`,
		``,
		`{"a":1}`,
		`[{"jsonrpc":"2.0","method":"x"}]`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, "\n")
	pr, pw := io.Pipe()
	var replies bytes.Buffer
	go guard(strings.NewReader(in), pw, &replies, slog.New(slog.DiscardHandler))
	passed, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `[{"jsonrpc":"2.0","method":"x"}]` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	if string(passed) != want {
		t.Errorf("passed through:\n%s\nwant:\n%s", passed, want)
	}
	lines := strings.Split(strings.TrimSuffix(replies.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"code":-32700`) || !strings.Contains(lines[0], "not JSON") ||
		!strings.Contains(lines[1], "not a JSON-RPC message") || !strings.Contains(lines[1], `"id":null`) {
		t.Errorf("replies:\n%s", replies.String())
	}
}

// A line past the cap is consumed to its end and reported, and the next
// line is read normally.
func TestReadLineTooLong(t *testing.T) {
	big := strings.Repeat("x", maxMessage+10)
	r := bufioReader(big + "\nnext\n")
	line, long, err := readLine(r)
	if !long || line != nil || err != nil {
		t.Fatalf("long line: %d bytes, long %v, err %v", len(line), long, err)
	}
	line, long, err = readLine(r)
	if long || string(line) != "next" || err != nil {
		t.Fatalf("next line: %q, long %v, err %v", line, long, err)
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 64<<10) }
