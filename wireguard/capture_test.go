package wireguard

import (
	"reflect"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// logFrame is one rebuilt fd-3 log frame fed to Capture.Log.
type logFrame struct {
	text            string
	open, truncated bool
}

func open(s string) logFrame { return logFrame{text: s, open: true} }
func line(s string) logFrame { return logFrame{text: s} }
func rep(s string, n int) string {
	return strings.Repeat(s, n)
}

func marker(n int64) string { return protocol.LogMarker(n) }

// recorder collects streamed events and checks them against the final logs.
type recorder struct{ events []protocol.LogEvent }

func (r *recorder) add(ev protocol.LogEvent) { r.events = append(r.events, ev) }

// checkStream asserts docs/child-protocol-wire.md §2.6.4: each index opens with one non-continued event (an
// empty ordinary entry is notified too), continuations are non-empty, indexes appear
// in ledger order, and concatenating the texts of an index gives exactly logs[index].
func (r *recorder) checkStream(t *testing.T, logs []string) {
	t.Helper()
	joined := make([]string, len(logs))
	next := 0
	for _, ev := range r.events {
		ok := ev.Continued && ev.Index < next && ev.Text != "" || !ev.Continued && ev.Index == next
		if !ok {
			t.Fatalf("bad event %+v (next index %d)", ev, next)
		}
		if !ev.Continued {
			next++
		}
		joined[ev.Index] += ev.Text
	}
	if next != len(logs) || !reflect.DeepEqual(joined, logs) {
		t.Fatalf("streamed %q\nwant     %q", joined, logs)
	}
}

// docs/child-protocol-wire.md §2.6.5: every worked example, as the frames the daemon receives.
func TestCaptureWorkedExamples(t *testing.T) {
	many := func(n int, f logFrame) []logFrame {
		out := make([]logFrame, n)
		for i := range out {
			out[i] = f
		}
		return out
	}
	for _, c := range []struct {
		name    string
		max     int64
		frames  []logFrame
		want    []string
		charged int64
	}{
		{"a then b", 64, []logFrame{open("a"), line("b")}, []string{"ab"}, 5},
		{"30 + 25", 64, []logFrame{open(rep("a", 30)), line(rep("b", 25))}, []string{rep("a", 30) + rep("b", 25)}, 58},
		{"30 + 30 exactly", 64, []logFrame{open(rep("a", 30)), line(rep("b", 30))}, []string{rep("a", 30) + rep("b", 30)}, 63},
		{"40 + 40", 64, []logFrame{open(rep("x", 40)), line(rep("y", 40))}, []string{rep("x", 40), marker(64)}, 43},
		{"16 fragments then empty close", 64, append(many(16, open("x")), line("")), []string{rep("x", 16)}, 19},
		{"2000 forged open fragments", 64, append(many(2000, open("a")), line("tail")), []string{rep("a", 60), marker(64)}, 63},
		{"open 61 by one byte", 64, []logFrame{open(rep("x", 61))}, []string{marker(64)}, 0},
		{"open 28, close 31, open x", 64, []logFrame{open(rep("a", 28)), line(rep("a", 31)), open("x")},
			[]string{rep("a", 59), marker(64)}, 62},
		{"committed prefix", 64, []logFrame{open("committed"), line(rep("x", 100))}, []string{"committed", marker(64)}, 12},
		{"a*60 exhausts, tail cannot fit", 64, []logFrame{line(rep("a", 60)), open(rep("b", 61))}, []string{rep("a", 60), marker(64)}, 63},
		{"child-side marker frame", 64, []logFrame{line(rep("a", 60)), {text: marker(64), truncated: true}}, []string{rep("a", 60), marker(64)}, 63},
		{"y*100 at 104", 104, []logFrame{line(rep("y", 100)), open(rep("z", 10))}, []string{rep("y", 100), marker(104)}, 103},
		{"9 of 50 at 128", 128, many(50, line(rep("a", 10))), append(many9(rep("a", 10)), marker(128)), 117},
		{"21 empty at 64", 64, many(10000, line("")), append(strings.Split(rep(",", 20), ","), marker(64)), 63},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec recorder
			cp := NewCapture(c.max, rec.add)
			for _, f := range c.frames {
				cp.Log(f.text, f.open, f.truncated)
			}
			cp.CloseHold()
			got := cp.Entries()
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("logs = %q\nwant   %q", got, c.want)
			}
			if cp.Charged() != c.charged {
				t.Errorf("charged %d, want %d", cp.Charged(), c.charged)
			}
			rec.checkStream(t, got)
		})
	}
}

func many9(s string) []string { return strings.Split(strings.TrimSuffix(rep(s+"\n", 9), "\n"), "\n") }

// Rule 1: the marker is unique and last; the truncating frame's text is discarded;
// a held prefix is committed first.
func TestCaptureTruncatedFrame(t *testing.T) {
	var rec recorder
	cp := NewCapture(64, rec.add)
	cp.Log("held", true, false)
	cp.Log("forged text", false, true)
	cp.Log("again", true, true)
	cp.Log("after", false, false)
	cp.Stray(1, []byte("native\n"))
	want := []string{"held", marker(64)}
	if got := cp.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("logs = %q", got)
	}
	wantEv := []protocol.LogEvent{{Index: 0, Text: "held"}, {Index: 1, Text: marker(64)}}
	if !reflect.DeepEqual(rec.events, wantEv) {
		t.Fatalf("events = %+v", rec.events)
	}
}

// Rule 2 details, docs/child-protocol-wire.md §2.6.4 events, and stray entries admitted while a hold is open.
func TestCaptureHoldAndStray(t *testing.T) {
	var rec recorder
	cp := NewCapture(1024, rec.add)
	cp.Log("", true, false) // empty first fragment: bills 3, no hold
	cp.Log("first", false, false)
	cp.Log("par", true, false)
	cp.Stray(2, []byte("native\n"))
	cp.Log("", true, false) // empty continuation: bills 0, no event
	cp.Log("t", true, false)
	if got := cp.Entries(); !reflect.DeepEqual(got, []string{"first", "part", "native"}) {
		t.Fatalf("open hold: %q", got)
	}
	cp.Log("ial", false, false)
	cp.Log("\xed\xa0\x80", false, false) // a lone surrogate costs 6 (+2 quotes +1)
	want := []string{"first", "partial", "native", "\xed\xa0\x80"}
	if got := cp.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("logs = %q", got)
	}
	if cp.Charged() != 3+8+6+9+0+1+3+9 {
		t.Errorf("charged %d", cp.Charged())
	}
	wantEv := []protocol.LogEvent{
		{Index: 0, Text: "first"}, {Index: 1, Text: "par"}, {Index: 2, Text: "native"},
		{Index: 1, Text: "t", Continued: true}, {Index: 1, Text: "ial", Continued: true},
		{Index: 3, Text: "\xed\xa0\x80"},
	}
	if !reflect.DeepEqual(rec.events, wantEv) {
		t.Fatalf("events = %+v", rec.events)
	}
}

// C55: a forged lone surrogate costs six bytes.
func TestCaptureLoneSurrogateCost(t *testing.T) {
	f, ok := DecodeFrame([]byte(`{"type":"log","text":"` + rep(`\ud800`, 1000) + `"}`))
	if !ok {
		t.Fatal("dropped")
	}
	cp := NewCapture(4096, nil)
	cp.Log(f.Text, f.Open, f.Truncated)
	if got := cp.Entries(); !reflect.DeepEqual(got, []string{marker(4096)}) {
		t.Fatalf("logs = %q", got)
	}
	cp = NewCapture(6004, nil)
	cp.Log(f.Text, false, false)
	if cp.Charged() != 6003 || len(cp.Entries()) != 1 {
		t.Fatalf("charged %d, logs %d", cp.Charged(), len(cp.Entries()))
	}
}

// CloseHold at the decision: the hold becomes an entry without a second charge.
func TestCaptureCloseHold(t *testing.T) {
	cp := NewCapture(64, nil)
	cp.Log("partial", true, false)
	cp.CloseHold()
	cp.CloseHold()
	cp.Stray(1, []byte("late native\n"))
	if got := cp.Entries(); !reflect.DeepEqual(got, []string{"partial", "late native"}) {
		t.Fatalf("logs = %q", got)
	}
	if cp.Charged() != 10+14 {
		t.Fatalf("charged %d", cp.Charged())
	}
}

// Catalogue ledger cases, fed as raw fd-3 lines through DecodeFrame and as native
// reads, the way the session drives Capture.
func TestCaptureCatalogue(t *testing.T) {
	nul10 := rep("\x00", 10)
	for _, c := range []struct {
		name  string
		max   int64
		lines []string // fd-3 lines, then the stray reads of stdout
		stray []string
		want  []string
	}{
		{"C153 forged truncation frames", 4096, []string{
			`{"type":"log","text":"first","truncated":"yes"}`,
			`{"type":"log","text":"MARK-A","truncated":true}`,
			`{"type":"log","text":"MARK-B","truncated":true}`,
		}, nil, []string{"first", marker(4096)}},
		{"C152 child truncation stops native capture", 64, []string{
			`{"type":"log","text":"` + marker(64) + `","truncated":true}`,
		}, []string{"AFTER"}, []string{marker(64)}},
		{"C164 controls billed escaped", 256,
			strings.Split(strings.TrimSuffix(rep(`{"type":"log","text":"`+rep(`\u0000`, 10)+`"}`+"\n", 500), "\n"), "\n"),
			nil, []string{nul10, nul10, nul10, nul10, marker(256)}},
		{"C161 flushed partial line survives", 64, []string{`{"type":"log","text":"before hang","open":true}`},
			nil, []string{"before hang"}},
		{"C180 multibyte split across reads", 1 << 20, nil,
			[]string{rep("a", 65535) + "\xe0\xa4", "\x80\xe4\xbd\xa0\xe5", "\xa5\xbd\xf0\x9f\x98\x80\xf4\x8f\xbf", "\xbf"},
			[]string{rep("a", 65535) + "\u0900\u4f60\u597d\U0001f600\U0010ffff"}},
		{"C182 native next to fd-3", 1024, []string{`{"type":"log","text":"py"}`}, []string{"stray stdout\n"},
			[]string{"py", "stray stdout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := NewCapture(c.max, nil)
			for _, l := range c.lines {
				if f, ok := DecodeFrame([]byte(l)); ok {
					cp.Log(f.Text, f.Open, f.Truncated)
				}
			}
			for _, s := range c.stray {
				cp.Stray(1, []byte(s))
			}
			cp.StrayEOF(1)
			cp.CloseHold()
			if got := cp.Entries(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("logs = %.300q\nwant   %.300q", got, c.want)
			}
		})
	}
}
