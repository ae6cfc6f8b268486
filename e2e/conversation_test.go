package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// conversationDir holds the transcripts; one subtest per file.
const conversationDir = "testdata/conversations"

// expectTimeout bounds the wait for each expected message or exit (generous:
// the daemon is built with -race and the machine is shared).
const expectTimeout = 30 * time.Second

// TestConversation plays every transcript in conversationDir (the format is
// in the README there) against its own real daemon: it sends the client
// lines and matches every daemon message, in arrival order, against the
// expectation lines; a message no line expects fails the transcript.
func TestConversation(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(conversationDir, "*.conv"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", conversationDir, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".conv"), func(t *testing.T) {
			t.Parallel()
			tr, err := parseTranscript(f)
			if err != nil {
				t.Fatal(err)
			}
			tr.play(t)
		})
	}
}

// stepKind is what one transcript line does.
type stepKind int

const (
	sendFramed stepKind = iota // "-->": a body, framed by the runner
	sendRaw                    // "--> raw": Go-quoted bytes, written as they are
	expectMsg                  // "<--": the next daemon message matches a pattern
	expectExit                 // "<-- exit N": the daemon process exits with code N
)

// step is one transcript line (with its continuation lines).
type step struct {
	kind    stepKind
	where   string // file:line, for failures
	text    string // the line as written, for failures
	body    string // sendFramed: body text with $captures still in it
	raw     []byte // sendRaw
	pattern any    // expectMsg: decoded JSON with placeholders
	code    int    // expectExit
}

type transcript struct {
	env   map[string]string
	steps []step
}

// parseTranscript reads a transcript file; syntax errors name the line.
func parseTranscript(path string) (*transcript, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tr := &transcript{env: map[string]string{}}
	var lines []numberedLine
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if len(lines) == 0 {
				return nil, fmt.Errorf("%s:%d: continuation line with nothing to continue", path, i+1)
			}
			lines[len(lines)-1].text += "\n" + line
		default:
			lines = append(lines, numberedLine{fmt.Sprintf("%s:%d", path, i+1), line})
		}
	}
	for _, l := range lines {
		if err := tr.add(l); err != nil {
			return nil, fmt.Errorf("%s: %v", l.where, err)
		}
	}
	return tr, nil
}

type numberedLine struct{ where, text string }

// add appends the step a line (joined with its continuations) describes.
func (tr *transcript) add(l numberedLine) error {
	s := step{where: l.where, text: l.text}
	var err error
	switch verb, rest, _ := strings.Cut(l.text, " "); verb {
	case "env":
		if len(tr.steps) > 0 {
			return fmt.Errorf("env must come before the first message")
		}
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return fmt.Errorf("env wants KEY=VALUE")
		}
		tr.env[k] = v
		return nil
	case "-->":
		if q, ok := strings.CutPrefix(rest, "raw "); ok {
			s.kind = sendRaw
			var str string
			str, err = strconv.Unquote(strings.TrimSpace(q))
			s.raw = []byte(str)
		} else {
			s.kind, s.body = sendFramed, rest
		}
	case "<--":
		if c, ok := strings.CutPrefix(rest, "exit "); ok {
			s.kind = expectExit
			s.code, err = strconv.Atoi(strings.TrimSpace(c))
		} else {
			s.kind = expectMsg
			s.pattern, err = decodeJSON([]byte(markPlaceholders(rest)))
		}
	default:
		return fmt.Errorf("a line starts with -->, <--, env or # (got %q)", verb)
	}
	if err != nil {
		return err
	}
	tr.steps = append(tr.steps, s)
	return nil
}

// placeholder is how a bare $name in a pattern survives JSON decoding: a
// string no daemon message carries (JSON text cannot hold a raw NUL).
const placeholder = "\x00$"

var bareName = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*`)

// rewriteBare replaces every $name outside JSON strings in text with
// repl(name); "$/cancelRequest" inside a string is left alone.
func rewriteBare(text string, repl func(name string) (string, error)) (string, error) {
	var b strings.Builder
	inString, escaped := false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			inString = escaped || c != '"'
			escaped = !escaped && c == '\\'
		case c == '"':
			inString = true
		case c == '$':
			if name := bareName.FindString(text[i:]); name != "" {
				r, err := repl(name[1:])
				if err != nil {
					return "", err
				}
				b.WriteString(r)
				i += len(name) - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func markPlaceholders(pattern string) string {
	s, _ := rewriteBare(pattern, func(name string) (string, error) {
		return show(placeholder + name), nil
	})
	return s
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

// player is one transcript being played against one daemon.
type player struct {
	t        *testing.T
	d        *daemon
	seen     int            // daemon messages consumed so far
	captures map[string]any // $name values captured by patterns
	exited   bool
}

func (tr *transcript) play(t *testing.T) {
	p := &player{t: t, d: start(t, tr.env), captures: map[string]any{}}
	for _, s := range tr.steps {
		switch s.kind {
		case sendFramed:
			p.sendBody(s)
		case sendRaw:
			p.d.writeRaw(s.raw)
		case expectMsg:
			p.expect(s)
		case expectExit:
			t.Logf("%s: %s", s.where, s.text) // waitExit's failure does not name the line
			if code := p.d.waitExit(expectTimeout); code != s.code {
				t.Fatalf("%s: %s\nthe daemon exited with code %d", s.where, s.text, code)
			}
			p.exited = true
		}
	}
	p.noneUnexpected()
}

// sendBody substitutes captured values and sends the body framed. The e2e
// helper answers binding/call on its own (echo) unless told otherwise, so
// every function a run declares is set to never be answered by it: the
// transcript answers.
func (p *player) sendBody(s step) {
	body, err := rewriteBare(s.body, func(name string) (string, error) {
		v, ok := p.captures[name]
		if !ok {
			return "", fmt.Errorf("$%s was not captured by an earlier <-- line", name)
		}
		b, err := json.Marshal(v)
		return string(b), err
	})
	if err != nil {
		p.t.Fatalf("%s: %s\n%v", s.where, s.text, err)
	}
	for _, f := range declaredFunctions(body) {
		p.d.behave(f, hang)
	}
	p.d.send(body)
}

// declaredFunctions lists the binding functions a run request declares, by
// name or as a typed function object {name, …}.
func declaredFunctions(body string) []string {
	var req struct {
		Params struct {
			Bindings []struct {
				Functions []json.RawMessage `json:"functions"`
			} `json:"bindings"`
		} `json:"params"`
	}
	var out []string
	if json.Unmarshal([]byte(body), &req) != nil {
		return nil
	}
	for _, b := range req.Params.Bindings {
		for _, f := range b.Functions {
			var name string
			var typed struct{ Name *string }
			if json.Unmarshal(f, &name) == nil {
				out = append(out, name)
			} else if json.Unmarshal(f, &typed) == nil && typed.Name != nil {
				out = append(out, *typed.Name)
			}
		}
	}
	return out
}

// next returns the next daemon message not yet consumed, or nil after timeout.
func (p *player) next(timeout time.Duration) *msg {
	deadline := time.Now().Add(timeout)
	for {
		if ev := p.d.snapshot(); len(ev) > p.seen {
			p.seen++
			return ev[p.seen-1].m
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *player) expect(s step) {
	m := p.next(expectTimeout)
	if m == nil {
		p.t.Fatalf("%s: %s\nno message from the daemon within %v", s.where, s.text, expectTimeout)
	}
	p.t.Logf("%s: %s", s.where, m.raw) // with -v: what a new transcript's lines should say
	got, err := decodeJSON(m.raw)
	if err != nil {
		p.t.Fatalf("%s: %s\nthe daemon sent invalid JSON %q: %v", s.where, s.text, m.raw, err)
	}
	vars := maps.Clone(p.captures)
	if err := match("", s.pattern, got, vars); err != nil {
		p.t.Fatalf("%s: %s\nactual:   %s\nmismatch: %v", s.where, s.text, m.raw, err)
	}
	p.captures = vars
}

// match compares a pattern with a decoded message: objects by member set
// (order ignored), arrays element by element, scalars exactly (numbers by
// their text), placeholders as the README says. A capture's first occurrence
// adds it to vars; later ones must equal it.
func match(path string, want, got any, vars map[string]any) error {
	if s, ok := want.(string); ok && strings.HasPrefix(s, placeholder) {
		return matchPlaceholder(path, strings.TrimPrefix(s, placeholder), got, vars)
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("at %s: want an object, got %s", pathOr(path), show(got))
		}
		if wk, gk := keys(w), keys(g); !slices.Equal(wk, gk) {
			return fmt.Errorf("at %s: members %v, want %v", pathOr(path), gk, wk)
		}
		for k, wv := range w {
			if err := match(path+"."+k, wv, g[k], vars); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("at %s: want an array of %d, got %s", pathOr(path), len(w), show(got))
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], vars); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("at %s: got %s, want %s", pathOr(path), show(got), show(want))
	}
	return nil
}

var integer = regexp.MustCompile(`^-?[0-9]+$`)

func matchPlaceholder(path, name string, got any, vars map[string]any) error {
	ok := true
	switch name {
	case "any":
	case "int":
		n, isNum := got.(json.Number)
		ok = isNum && integer.MatchString(string(n))
	case "num":
		_, ok = got.(json.Number)
	case "str":
		_, ok = got.(string)
	default:
		if v, seen := vars[name]; seen {
			ok = reflect.DeepEqual(v, got)
		} else {
			vars[name] = got
		}
	}
	if !ok {
		return fmt.Errorf("at %s: got %s, want $%s", pathOr(path), show(got), name)
	}
	return nil
}

// noneUnexpected fails if the daemon sent a message no line expected. A
// daemon still running is told to exit first (its teardown settles every run
// it still has), so every message it will ever send is in.
func (p *player) noneUnexpected() {
	if !p.exited {
		p.d.notify("exit", "null")
		p.d.waitExit(expectTimeout)
	}
	for _, e := range p.d.snapshot()[p.seen:] {
		p.t.Errorf("after the last line, an unexpected message: %s", e.m.raw)
	}
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func pathOr(path string) string {
	if path == "" {
		return "the top"
	}
	return path
}

// TestConversationMatch pins the pattern semantics the README promises, so a
// transcript's expectations mean what they say.
func TestConversationMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, message string
		ok               bool
	}{
		{`{"a":1,"b":[true,null]}`, `{"b":[true,null],"a":1}`, true}, // member order ignored
		{`{"a":1}`, `{"a":1,"b":2}`, false},                          // an extra member
		{`{"a":1,"b":2}`, `{"a":1}`, false},                          // a missing member
		{`[1,2]`, `[2,1]`, false},
		{`{"n":1}`, `{"n":1.0}`, false}, // numbers by their text
		{`{"n":$int}`, `{"n":-12}`, true},
		{`{"n":$int}`, `{"n":1.5}`, false},
		{`{"n":$int}`, `{"n":"1"}`, false},
		{`{"n":$num}`, `{"n":1.5e3}`, true},
		{`{"s":$str}`, `{"s":""}`, true},
		{`{"s":$str}`, `{"s":null}`, false},
		{`{"v":$any}`, `{"v":{"deep":[1]}}`, true},
		{`{"v":$any}`, `{}`, false}, // $any is present
		{`{"m":"$/cancelRequest"}`, `{"m":"$/cancelRequest"}`, true},
		{`{"m":"$str"}`, `{"m":"other"}`, false}, // inside a string, $ is literal
		{`{"a":$x,"b":$x}`, `{"a":"id","b":"id"}`, true},
		{`{"a":$x,"b":$x}`, `{"a":1,"b":2}`, false}, // a capture reused must be equal
	}
	for _, c := range cases {
		want, err := decodeJSON([]byte(markPlaceholders(c.pattern)))
		if err != nil {
			t.Fatalf("pattern %s: %v", c.pattern, err)
		}
		got, err := decodeJSON([]byte(c.message))
		if err != nil {
			t.Fatalf("message %s: %v", c.message, err)
		}
		if err := match("", want, got, map[string]any{}); (err == nil) != c.ok {
			t.Errorf("pattern %s, message %s: match error %v, want ok=%v", c.pattern, c.message, err, c.ok)
		}
	}
}
