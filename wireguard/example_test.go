package wireguard_test

import (
	"fmt"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// The fd-3 stream is cut into lines whatever the read boundaries; a line longer than
// the cap stops the stream for good.
func ExampleFramer() {
	f := wireguard.NewFramer(32)
	for _, read := range []string{`{"type":"bo`, "ot-ack\"}\n\n{\"type\":\"do", "ne\"}\n", `{"type":"log","text":"far too long"}`} {
		frames, err := f.Feed([]byte(read))
		for _, fr := range frames {
			fmt.Printf("frame %s\n", fr)
		}
		if err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// frame {"type":"boot-ack"}
	// frame {"type":"done"}
	// wireguard: fd-3 frame exceeds the frame cap
}

// A frame is rebuilt from what its type reads; anything else is junk and dropped.
func ExampleDecodeFrame() {
	for _, line := range []string{
		`{"type":"call","id":1,"global":"tools","name":"search","args":{ "q" : "\u00e9", "n" : 1.0e1 },"extra":0}`,
		`{"type":"log","text":"a\ud800","open":true}`,
		`{"type":"log","text":"twice","text":"?"}`,
		`{"type":"call","id":2,"global":"t","name":"f","args":[9007199254740993]}`,
	} {
		f, ok := wireguard.DecodeFrame([]byte(line))
		switch {
		case !ok:
			fmt.Println("dropped")
		case f.Type == protocol.FrameCall:
			fmt.Printf("call %v %s.%s %s\n", f.ID, f.Global, f.Name, f.Args)
		default:
			fmt.Printf("log %q open=%v\n", f.Text, f.Open)
		}
	}
	// Output:
	// call 1 tools.search {"q":"é","n":10}
	// log "a\xed\xa0\x80" open=true
	// dropped
	// dropped
}

// CheckValue meters a value by its canonical form, decides over-budget first, and
// returns the canonical text of a lossless value.
func ExampleCheckValue() {
	for _, c := range []struct {
		raw    string
		budget int64
	}{
		{`[1.50, "\u0041\ud800", {"a" : 2e0}]`, 100},
		{`[1.50, "\u0041\ud800", {"a" : 2e0}]`, 8},
		{`{"z": -0.0}`, 100},
		{`1e400`, 100},
	} {
		if canon, v := wireguard.CheckValue([]byte(c.raw), c.budget); v == wireguard.VerdictOK {
			fmt.Printf("%s within %d\n", canon, c.budget)
		} else {
			fmt.Printf("%s: %v at %d\n", c.raw, v, c.budget)
		}
	}
	// Output:
	// [1.5,"A\ud800",{"a":2}] within 100
	// [1.50, "\u0041\ud800", {"a" : 2e0}]: over-budget at 8
	// {"z": -0.0}: non-lossless at 100
	// 1e400: non-lossless at 100
}

// The ledger bills each entry by its JSON cost; the entry that does not fit is
// replaced by the marker, and capture stops.
func ExampleCapture() {
	c := wireguard.NewCapture(64, func(e protocol.LogEvent) { fmt.Printf("event %d %q\n", e.Index, e.Text) })
	c.Log("hello ", true, false) // an open hold: a line flushed in fragments
	c.Log("world", false, false)
	c.Log("an entry far too long to fit in what remains of 64 bytes", false, false)
	c.Log("ignored", false, false)
	fmt.Printf("%q charged %d\n", c.Entries(), c.Charged())
	// Output:
	// event 0 "hello "
	// event 0 "world"
	// event 1 "[coderun] log capture truncated at 64 bytes"
	// ["hello world" "[coderun] log capture truncated at 64 bytes"] charged 14
}

// Members reads a client's message: Strict refuses invalid UTF-8, Lax reports it on
// the member that holds it; repeated names are kept, and Last picks JSON.parse's.
func ExampleMembers() {
	msg := []byte("{\"id\":1,\"result\":\"\xff\",\"id\":2}")
	if _, err := wireguard.Members(msg, wireguard.Strict); err != nil {
		fmt.Println("strict:", err)
	}
	ms, _ := wireguard.Members(msg, wireguard.Lax)
	for _, m := range ms {
		fmt.Printf("lax: %s = %q bad UTF-8 %v\n", m.Name, m.Value, m.BadUTF8)
	}
	id, _ := wireguard.Last(ms, "id")
	fmt.Printf("id %s\n", id.Value)
	// Output:
	// strict: wireguard: not exactly one JSON value
	// lax: id = "1" bad UTF-8 false
	// lax: result = "\"\xff\"" bad UTF-8 true
	// lax: id = "2" bad UTF-8 false
	// id 2
}

// AppendString writes a WTF-8 string in the canonical form: no HTML escaping, a lone
// surrogate as its escape; DecodeString reads it back.
func ExampleAppendString() {
	enc := wireguard.AppendString(nil, "<é>\t\xed\xa0\x80")
	dec, _ := wireguard.DecodeString(enc)
	fmt.Printf("%s %q\n", enc, dec)
	// Output:
	// "<é>\t\ud800" "<é>\t\xed\xa0\x80"
}
