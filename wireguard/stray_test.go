package wireguard

import (
	"bytes"
	"reflect"
	"runtime"
	"testing"
)

// strayWrite is one read from a native pipe (stream 1 or 2); eof marks end of stream.
type strayWrite struct {
	stream int
	data   string
	eof    bool
}

func w(stream int, data string) strayWrite { return strayWrite{stream: stream, data: data} }
func eof(stream int) strayWrite            { return strayWrite{stream: stream, eof: true} }

// bytewise splits data into one read per byte.
func bytewise(stream int, data string) []strayWrite {
	out := make([]strayWrite, len(data))
	for i := range data {
		out[i] = w(stream, data[i:i+1])
	}
	return out
}

func runStray(max int64, writes []strayWrite) *Capture {
	cp := NewCapture(max, nil)
	for _, s := range writes {
		if s.eof {
			cp.StrayEOF(s.stream)
		} else {
			cp.Stray(s.stream, []byte(s.data))
		}
	}
	return cp
}

// docs/child-protocol-daemon.md §4.5 and the catalogue's native-output cases.
func TestStray(t *testing.T) {
	x60000 := rep("x", 60000) + "\n"
	for _, c := range []struct {
		name    string
		max     int64
		writes  []strayWrite
		want    []string
		charged int64
	}{
		{"C49 own newlines", 1024, []strayWrite{w(1, "one\ntwo\nthree"), eof(1)}, []string{"one", "two", "three"}, 6 + 6 + 8},
		{"C50 per-stream order", 1024,
			[]strayWrite{w(1, "stdout-one\n"), w(2, "stderr-one\n"), w(1, "stdout-two\n"), w(2, "stderr-two\n")},
			[]string{"stdout-one", "stderr-one", "stdout-two", "stderr-two"}, 52},
		{"streams do not mix residuals", 1024, []strayWrite{w(1, "o1"), w(2, "e1"), w(1, "o2\n"), eof(2)}, []string{"o1o2", "e1"}, 12},
		{"empty native lines are entries", 1024, []strayWrite{w(1, "\n\n")}, []string{"", ""}, 6},
		{"empty residual at EOF is nothing", 1024, []strayWrite{w(1, "a\n"), eof(1), eof(2)}, []string{"a"}, 4},
		{"C51 newline-free flood", 4096, []strayWrite{w(1, rep("A", 2000000)), eof(1)}, []string{marker(4096)}, 0},
		{"C52 NUL residual", 4096, []strayWrite{w(1, rep("\x00", 4000)), eof(1)}, []string{marker(4096)}, 0},
		{"C54 invalid bytes one by one", 3072, bytewise(1, rep("\xff", 3200)), []string{marker(3072)}, 0},
		{"C56 later lines in the read dropped", 64, []strayWrite{w(1, rep("A", 100)+"\nSECOND\n")}, []string{marker(64)}, 0},
		{"C57 broken sequence across reads", 1024, []strayWrite{w(1, "\xe4"), w(1, "A\n")}, []string{"\uFFFDA"}, 7},
		{"split character reassembled", 1024, []strayWrite{w(1, "\xe4"), w(1, "\xb8"), w(1, "\xad\n")}, []string{"中"}, 6},
		{"replacement per byte", 1024, []strayWrite{w(2, "\xff|\xed\xa0\x80|\xc0\xaf|"), w(2, "\xe4\xbd"), eof(2)},
			[]string{rep("\uFFFD|", 1) + rep("\uFFFD", 3) + "|" + rep("\uFFFD", 2) + "|" + rep("\uFFFD", 2)}, 8*3 + 3 + 3},
		{"200000 bytes newline-free is one entry", 300000, []strayWrite{w(1, rep("z", 200000)), eof(1)}, []string{rep("z", 200000)}, 200003},
		{"C230 byte per read", 200000, bytewise(1, x60000), []string{x60000[:60000]}, 60003},
		{"exact fit is no trigger", 16, []strayWrite{w(1, rep("a", 12)), w(1, "\n")}, []string{rep("a", 12)}, 15},
		{"one over triggers", 16, []strayWrite{w(1, rep("a", 13)), w(1, "\n")}, []string{marker(16)}, 0},
		{"controls by serialized cost", 64, []strayWrite{w(1, "\"\\\t\x01\n")}, []string{"\"\\\t\x01"}, 2 + 2 + 2 + 2 + 6 + 1},
		// Trigger (b) on the combined cost: the stdout residual (3 + 3) is admitted,
		// the stderr one cannot fit then.
		{"combined trigger admits both", 16, []strayWrite{w(1, "ooo"), w(2, "eeeeeeeeeee")}, []string{"ooo", marker(16)}, 6},
		// The incomplete tail counts at its lower bound: an exact-fit line with a
		// multibyte character at the end is not split.
		{"tail lower bound", 16, []strayWrite{w(1, "abcdefghi\xe4"), w(1, "\xb8\xad\n")}, []string{"abcdefghi中"}, 15},
		// When the trigger fires inside a sequence, the complete part is admitted and
		// the incomplete tail carried over, not rendered.
		{"tail carried over", 16, []strayWrite{w(1, "abcdefghij\xe4"), w(1, "\xb8\xad\n")},
			[]string{"abcdefghij", marker(16)}, 13},
		// A 4-byte lead counts 4: both residuals fit once the tail is carried.
		{"both admitted, tail carried", 21, []strayWrite{w(1, "a\xf0"), w(2, rep("e", 13)), w(1, "\x9f\x98\x80\n")},
			[]string{"a", rep("e", 13), marker(21)}, 4 + 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := runStray(c.max, c.writes)
			cp.FlushStray()
			if got := cp.Entries(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("logs = %.200q\nwant   %.200q", got, c.want)
			}
			if cp.Charged() != c.charged {
				t.Errorf("charged %d, want %d", cp.Charged(), c.charged)
			}
		})
	}
}

// C54 [unit]: the stdout residual never holds more than 1023 bytes.
func TestStrayResidualBounded(t *testing.T) {
	cp := NewCapture(3072, nil)
	most := 0
	for range 3200 {
		cp.Stray(1, []byte{0xff})
		most = max(most, len(cp.stray[0].buf))
	}
	if most > 1023 {
		t.Fatalf("residual held %d bytes", most)
	}
}

// C230 [unit]: one byte per read, the residual copies fewer than 256 KiB in total.
func TestStrayLinearMerge(t *testing.T) {
	cp := NewCapture(200000, nil)
	one := []byte{'x'}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 60000 {
		cp.Stray(1, one)
	}
	runtime.ReadMemStats(&after)
	cp.Stray(1, []byte{'\n'})
	if got := after.TotalAlloc - before.TotalAlloc; got >= 256<<10 {
		t.Fatalf("allocated %d bytes", got)
	}
	if logs := cp.Entries(); len(logs) != 1 || len(logs[0]) != 60000 {
		t.Fatalf("logs %d", len(logs))
	}
}

// C228 for residuals: the residual is a copy of the read buffer.
func TestStrayResidualIsCopy(t *testing.T) {
	cp := NewCapture(1024, nil)
	read := make([]byte, 4096)
	n := copy(read, "abc")
	cp.Stray(1, read[:n])
	copy(read, "XYZ")
	if string(cp.stray[0].buf) != "abc" || cap(cp.stray[0].buf) >= 4096 {
		t.Fatalf("residual %q cap %d", cp.stray[0].buf, cap(cp.stray[0].buf))
	}
	cp.StrayEOF(1)
	if cp.stray[0].buf != nil || !reflect.DeepEqual(cp.Entries(), []string{"abc"}) {
		t.Fatalf("after EOF: %q %q", cp.stray[0].buf, cp.Entries())
	}
}

// The incremental cost always equals the serialized cost of the rendered residual
// (with a broken tail) — the invariant trigger (b) relies on.
func TestStrayIncrementalCost(t *testing.T) {
	for _, s := range []string{
		"plain", "\x00\"\\", "\xff\xfe", "\xe4\xb8\xad", "\xe4\xb8", "\xe4A", "\xf0\x9f\x98\x80",
		"\xf0\x9f\x98", "\xed\xa0\x80", "\xe0\x80\x80", "\xf4\x90\x80\x80", "\xc2\x80\xc2", "\xef\xbf\xbd",
	} {
		var r residual
		for _, b := range []byte(s) {
			r.step(b)
		}
		r.step('\n') // breaks any tail, as the end of the line does
		if want := stringCost(render([]byte(s+"\n"))) - 2; r.cost != want {
			t.Errorf("%q: incremental cost %d, want %d", s, r.cost, want)
		}
	}
	if !bytes.Equal([]byte(render([]byte("\xe4\xbd"))), []byte("\uFFFD\uFFFD")) {
		t.Error("dangling E4 BD must render as two U+FFFD")
	}
}
