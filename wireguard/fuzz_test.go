package wireguard

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Fuzz properties, stated once for every target: nothing panics; nothing exceeds its
// budget (the frame cap, the value budget, the log ledger); accepted input
// re-encodes to the same value — canonical(canonical(x)) == canonical(x), and a
// rebuilt frame re-encoded and decoded again is the same frame.

// catalogueValues seed the JSON-level targets with the catalogue's codec cases.
var catalogueValues = []string{
	`null`, `true`, `false`, `0`, `-1.5`, `"a\"b\\"`, `[]`, `{}`, `[1,"x",null]`,
	`{"a":[1,2],"b":{"c":"d"}}`, `"\u0000"`, `"é"`, `"😀"`, `"\ud800"`, `"\ud800a"`, `"中"`,
	`{ "own" : 1 }`, `"\u00e9"`, `1.0`, `1E2`, `1e400`, `-1e400`, `-0`, `-0.0`, `-0e5`, `-1e-400`,
	`1e-400`, `[[[[{"x":-0}]]]]`, `{"a":1,"a":2}`, `{"\u0061":1}`, `9007199254740993`,
	`9007199254740992`, `18446744073709551616`, `9007199254740993.0`, `9e99`,
	`"a\"9007199254740993"`, `[1152921504606846976]`, `1e21`, `1e-7`, `1e-6`, `5e-324`,
	`1.7976931348623157e308`, `-2.5e-8`, `[1e400, "xxxxxxxxxx"]`, `"\ud83d\ude00\udc00"`,
	strings.Repeat("[", 200) + "0" + strings.Repeat("]", 200), "\"\xed\xa0\x80\"", "\"\xff\"",
	// strings long enough for the word-at-a-time skips, specials at uneven offsets
	`{"text":"` + strings.Repeat("abcdefg", 5) + `\"x\\` + strings.Repeat("hij", 7) + `\u0041é\n"}`,
	"\"" + strings.Repeat("0123456789", 3) + "\x1f" + strings.Repeat("y", 11) + "\"",
}

func FuzzCheckValue(f *testing.F) {
	for i, v := range catalogueValues {
		f.Add([]byte(v), int64(i*3))
	}
	f.Fuzz(func(t *testing.T, raw []byte, budget int64) {
		canon, v := CheckValue(raw, budget)
		full, fv := CheckValue(raw, noBudget)
		valid := Valid(raw, Strict)
		if valid != (json.Valid(raw) && utf8.Valid(raw)) && bytes.Count(raw, []byte("[")) < 9000 {
			t.Fatalf("scanner says %v, encoding/json+utf8 disagree", valid)
		}
		switch v {
		case VerdictOK:
			if int64(len(canon)) > budget || fv != VerdictOK || !bytes.Equal(canon, full) {
				t.Fatalf("ok at %d: %q, unlimited %v %q", budget, canon, fv, full)
			}
		case VerdictNonLossless:
			if fv != VerdictNonLossless {
				t.Fatalf("non-lossless at %d but %v unlimited", budget, fv)
			}
		case VerdictOverBudget:
			if fv == VerdictOK && int64(len(full)) <= budget {
				t.Fatalf("over budget %d but the canonical form has %d bytes", budget, len(full))
			}
		}
		if fv != VerdictOK {
			return
		}
		if again, v := CheckValue(full, int64(len(full))); v != VerdictOK || !bytes.Equal(again, full) {
			t.Fatalf("canonical not idempotent: %q → %v %q", full, v, again)
		}
		if _, v := CheckValue(full, int64(len(full))-1); v != VerdictOverBudget {
			t.Fatalf("meter not exact for %q: %v", full, v)
		}
		sameValue(t, raw, full)
	})
}

// sameValue checks with encoding/json (numbers as float64, lone surrogates turned
// into U+FFFD on both sides, duplicates merged on both sides) that canonicalization
// kept the value.
func sameValue(t *testing.T, raw, canon []byte) {
	if bytes.Count(raw, []byte("[")) >= 9000 { // encoding/json's depth limit
		return
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(canon, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("value changed: %q → %q", raw, canon)
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, line := range []string{
		`{"type":"boot-ack","extra":"x"}`, `{"type":"log","text":42}`,
		`{"type":"log","text":"a","open":true}`, `{"type":"log","text":"a","open":1,"truncated":"yes"}`,
		`{"type":"log","text":"m","truncated":true}`, `{"type":"log","text":"\ud800\ud83d\ude00"}`,
		`{"type":"call","id":0,"global":"t","name":"n","args":null}`,
		`{"type":"call","id":1,"global":"t","name":"n","args":{"n":1e400}}`,
		`{"type":"call","id":-0,"global":"t","name":"n","args":[0, 1.5]}`,
		`{"type":"call","id":1.5,"global":"\u0074","name":"my-tool","args":{"a":1,"a":2.0}}`,
		`{"type":"done"}`, `{"type":"done","value":null}`, `{"type": "done", "value": [1e400, {"x": -0}]}`,
		`{"type":"done","error":{"kind":"exception","message":"m","exceptionType":"ValueError","line":3}}`,
		`{"type":"done","error":{"kind":"output-limit","message":"m","exceptionType":7,"line":1.5}}`,
		`{"type":"done","error":{"kind":"timeout","message":"m"}}`, `{"type":"done","error":null}`,
		`{"type":"log","text":"a","n":9007199254740993}`, `{"type":"log","type":"log","text":"a"}`,
		"{\"type\":\"log\",\"text\":\"\xed\xa0\x80\"}", `null`, `[]`, `{}`,
		`{"type":"output","data":{"text/plain":"a\u00e9\ud800","image/png":"AAE="}}`, `{"type":"output","truncated":true}`,
		`{"type":"output","data":{ "text/plain" : "\u00e9" }}`, `{"type":"output","data":{"text/html":"<b>é</b>"}}`,
		`{"type":"output","data":{"image/png":"R0lGODlh","text/plain":"x"}}`, `{"type":"output","data":{"image/gif":"PHN2Zy8+"}}`,
	} {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, ok := DecodeFrame(line)
		if !ok {
			return
		}
		if !utf8.Valid(line) {
			t.Fatal("accepted invalid UTF-8")
		}
		if fr.Type == protocol.FrameOutput && fr.Data == nil && !fr.Truncated {
			if len(fr.Refused) == 0 {
				t.Fatal("an output with neither data nor refused images")
			}
			return // nothing kept: nothing to encode again
		}
		if fr.Data != nil {
			// An output's canonical copy (without its refused images) is valid JSON,
			// the fast copy agrees with it, and it is what the round trip compares.
			data := outputData(fr.Data, fr.Refused)
			if !Valid(data, Strict) || !bytes.Equal(fr.OutputCopy(), data) {
				t.Fatalf("output data: %q → %q, fast copy %q", fr.Data, data, fr.OutputCopy())
			}
			// What the daemon keeps of an output is what it billed, base64 at 4/3 of
			// the bytes it decodes to (docs/protocol-files.md §12.4).
			if held := int64(len(data)); held > fr.DataSize+(fr.DataSize+2)/3 {
				t.Fatalf("output data of %d bytes billed %d: %q", held, fr.DataSize, data)
			}
			fr.Data, fr.dataCanonical, fr.Refused = data, false, nil
		}
		if fr.Args != nil {
			if again, v := CheckValue(fr.Args, noBudget); v != VerdictOK || !bytes.Equal(again, fr.Args) {
				t.Fatalf("args not canonical: %q", fr.Args)
			}
		}
		enc := encodeFrame(fr)
		again, ok := DecodeFrame(enc)
		again.dataCanonical = false // the fast copy was checked above
		if !ok || !reflect.DeepEqual(again, fr) {
			t.Fatalf("round trip: %q\n→ %q\n%+v\n%+v", line, enc, fr, again)
		}
	})
}

// encodeFrame writes a rebuilt frame back as a compact line.
func encodeFrame(f Frame) []byte {
	b := append([]byte(`{"type":`), AppendString(nil, f.Type)...)
	field := func(name string) { b = append(append(append(b, ','), AppendString(nil, name)...), ':') }
	switch f.Type {
	case "log":
		field("text")
		b = AppendString(b, f.Text)
		if f.Open {
			field("open")
			b = append(b, "true"...)
		}
		if f.Truncated {
			field("truncated")
			b = append(b, "true"...)
		}
	case "call":
		field("id")
		b = AppendNumber(b, f.ID)
		field("global")
		b = AppendString(b, f.Global)
		field("name")
		b = AppendString(b, f.Name)
		field("args")
		b = append(b, f.Args...)
	case "output":
		if f.Truncated {
			field("truncated")
			b = append(b, "true"...)
		} else {
			field("data")
			b = append(b, f.Data...)
		}
	case "done":
		if f.HasValue {
			field("value")
			b = append(b, f.Value...)
		}
		if e := f.Error; e != nil {
			field("error")
			b = append(append(b, `{"kind":`...), AppendString(nil, e.Kind)...)
			field("message")
			b = AppendString(b, e.Message)
			if e.ExceptionType != nil {
				field("exceptionType")
				b = AppendString(b, *e.ExceptionType)
			}
			if e.Line != nil {
				field("line")
				b = AppendNumber(b, float64(*e.Line))
			}
			b = append(b, '}')
		}
	}
	return append(b, '}')
}

func FuzzFramer(f *testing.F) {
	f.Add([]byte("abc\n\nde\nfgh"), uint8(4), uint8(1))
	f.Add([]byte("abcd\nefgh\n"), uint8(4), uint8(3))
	f.Add([]byte("ab\ncd\nxxxxxxx"), uint8(4), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, capacity, chunk uint8) {
		whole, wErr := NewFramer(int(capacity)).Feed(data)
		fr := NewFramer(int(capacity))
		var parts [][]byte
		var pErr error
		for p := data; len(p) > 0 && pErr == nil; {
			n := min(len(p), int(chunk)+1)
			var got [][]byte
			got, pErr = fr.Feed(p[:n])
			for _, g := range got { // valid until the next Feed
				parts = append(parts, bytes.Clone(g))
			}
			p = p[n:]
		}
		if (wErr == nil) != (pErr == nil) || !reflect.DeepEqual(whole, parts) {
			t.Fatalf("chunking changed the result: %q %v vs %q %v", whole, wErr, parts, pErr)
		}
		lines := bytes.Split(data, []byte("\n"))
		tooLong := false
		var want [][]byte
		for i, l := range lines {
			if len(l) > int(capacity) {
				tooLong = true
				break
			}
			if len(l) > 0 && i < len(lines)-1 {
				want = append(want, l)
			}
		}
		if tooLong != (wErr != nil) || !reflect.DeepEqual(want, whole) {
			t.Fatalf("frames %q err %v, want %q tooLong %v", whole, wErr, want, tooLong)
		}
	})
}

// FuzzBoundedFramer: a bounded Framer gives the same lines whatever the read
// boundaries; each line longer than the probe is judged on its first probe
// bytes and refused (its head only) when longer than its room; past the cap
// the stream fails; and the Framer never holds more of a frame than its room.
func FuzzBoundedFramer(f *testing.F) {
	f.Add([]byte("abcdefgh\nxy\nq"), uint8(16), uint8(3), uint8(1))
	f.Add([]byte("\x05bcdefgh\n\x09bcdefghij\nz\n"), uint8(12), uint8(2), uint8(4))
	f.Fuzz(func(t *testing.T, data []byte, capacity, probe, chunk uint8) {
		room := func(head []byte) int { return int(head[0] % 32) }
		newFramer := func() *Framer { return NewBoundedFramer(int(capacity), int(probe), room) }
		whole, wErr := newFramer().FeedLines(data)
		whole = cloneLines(whole)
		fr := newFramer()
		var parts []Line
		var pErr error
		for p := data; len(p) > 0 && pErr == nil; {
			n := min(len(p), int(chunk)+1)
			var got []Line
			got, pErr = fr.FeedLines(p[:n])
			parts = append(parts, cloneLines(got)...)
			if held := len(fr.buf); held > max(fr.limit, fr.probe) {
				t.Fatalf("holds %d bytes of a frame with room %d (probe %d)", held, fr.limit, fr.probe)
			}
			p = p[n:]
		}
		if (wErr == nil) != (pErr == nil) || !reflect.DeepEqual(whole, parts) {
			t.Fatalf("chunking changed the result: %+v %v vs %+v %v", whole, wErr, parts, pErr)
		}
		want, tooLong := boundedModel(data, int(capacity), min(max(int(probe), 1), int(capacity)), room)
		if tooLong != (wErr != nil) || !reflect.DeepEqual(want, whole) {
			t.Fatalf("lines %+v err %v, want %+v tooLong %v", whole, wErr, want, tooLong)
		}
	})
}

// boundedModel is what a bounded Framer should return for data, line by line.
func boundedModel(data []byte, capacity, probe int, room func([]byte) int) (want []Line, tooLong bool) {
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if len(l) > capacity {
			return want, true
		}
		if len(l) == 0 || i == len(lines)-1 {
			continue
		}
		if len(l) > probe && len(l) > min(max(room(l[:probe]), probe), capacity) {
			want = append(want, Line{Bytes: l[:probe], Refused: true})
			continue
		}
		want = append(want, Line{Bytes: l})
	}
	return want, false
}

func cloneLines(ls []Line) (out []Line) {
	for _, l := range ls {
		out = append(out, Line{Bytes: bytes.Clone(l.Bytes), Refused: l.Refused})
	}
	return out
}

// FuzzCapture drives the ledger with a script of frames and stray reads. Beyond the
// common properties: the marker is unique and last, the serialized logs fit
// maxLogBytes, streamed events rebuild the logs, and a single stray stream gives the
// same logs whatever its read boundaries.
func FuzzCapture(f *testing.F) {
	for _, c := range []struct {
		script string
		extra  uint8
	}{
		{op(1, "a") + op(0, "b"), 0},
		{op(2, "one\ntwo\nthree") + op(3, ""), 10},
		{op(2, "\xe4") + op(2, "A\n") + op(4, "\xff\xfe") + op(5, ""), 3},
		{strings.Repeat(op(1, "a"), 100) + op(0, "b"), 0},
		{op(1, strings.Repeat("x", 40)) + op(0, strings.Repeat("y", 40)), 0},
		{op(4, "ee") + op(2, "abcdefghij\xe4") + op(2, "\xb8\xad\n"), 200},
		{op(2, "a\xf0") + op(4, strings.Repeat("e", 13)) + op(2, "\x9f\x98\x80\n"), 0},
		{op(1, "held") + op(4, "native\n") + op(6, "x") + op(0, "after"), 1},
		{op(0, "\xed\xa0\x80\x00\"\\") + op(2, strings.Repeat("\x00", 30)), 0},
	} {
		f.Add([]byte(c.script), c.extra)
	}
	f.Fuzz(func(t *testing.T, script []byte, extra uint8) {
		max := 64 + int64(extra)
		var rec recorder
		cp := NewCapture(max, rec.add)
		runScript(cp, script)
		cp.FlushStray()
		cp.CloseHold()
		logs := cp.Entries()
		rec.checkStream(t, logs)
		checkLedger(t, cp, logs, max)
		one, bytewise := NewCapture(max, nil), NewCapture(max, nil)
		one.Stray(1, script)
		for i := range script {
			bytewise.Stray(1, script[i:i+1])
		}
		one.StrayEOF(1)
		bytewise.StrayEOF(1)
		if a, b := one.Entries(), bytewise.Entries(); !reflect.DeepEqual(a, b) || one.Charged() != bytewise.Charged() {
			t.Fatalf("read boundaries changed the logs: %q vs %q", a, b)
		}
	})
}

// runScript interprets script as operations: an opcode byte, a length byte, then
// that many data bytes. Opcodes (mod 8): 0 log, 1 open log, 2 stray stdout, 3 stdout
// EOF, 4 stray stderr, 5 stderr EOF, 6 truncated log, 7 close the hold.
func runScript(cp *Capture, script []byte) {
	for len(script) >= 2 {
		op, n := script[0]%8, min(int(script[1]), len(script)-2)
		data := script[2 : 2+n]
		script = script[2+n:]
		switch op {
		case 0, 1, 6:
			cp.Log(string(data), op == 1, op == 6)
		case 2, 4:
			cp.Stray(1+int(op)/4, data)
		case 3, 5:
			cp.StrayEOF(1 + int(op)/5)
		case 7:
			cp.CloseHold()
		}
	}
}

// op encodes one runScript operation.
func op(code byte, data string) string { return string([]byte{code, byte(len(data))}) + data }

// checkLedger asserts the marker is at most once and last, and that the serialized
// entries fit the budget the ledger charged.
func checkLedger(t *testing.T, cp *Capture, logs []string, max int64) {
	marker := marker(max)
	entries := logs
	if n := len(logs); n > 0 && logs[n-1] == marker && cp.truncated {
		entries = logs[:n-1]
	}
	size := int64(1)
	for _, e := range entries {
		size += stringCost(e) + 1
	}
	if cp.Charged() > max-1 || size > cp.Charged()+1 || size > max {
		t.Fatalf("charged %d, serialized %d, max %d", cp.Charged(), size, max)
	}
	if !cp.truncated && len(entries) != len(logs) {
		t.Fatal("marker without truncation")
	}
}
