package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

type logNote struct {
	RunID     json.RawMessage `json:"runId"`
	Index     int             `json:"index"`
	Text      string          `json:"text"`
	Continued bool            `json:"continued"`
}

// streamed returns the run/log notifications of run id, in order.
func (d *daemon) streamed(id string) []logNote {
	var out []logNote
	for _, e := range d.snapshot() {
		if e.m.Method != "run/log" {
			continue
		}
		var n logNote
		json.Unmarshal(e.m.Params, &n)
		if string(n.RunID) == id {
			out = append(out, n)
		}
	}
	return out
}

func merge(notes []logNote) []string {
	var out []string
	for _, n := range notes {
		if n.Continued && n.Index == len(out)-1 {
			out[n.Index] += n.Text
		} else {
			out = append(out, n.Text)
		}
	}
	return out
}

// docs/protocol.md §5 / docs/child-protocol-wire.md §2.6.4: open fragments stream as continued
// notifications, the truncation marker is streamed, and the merged stream
// equals the final logs — for concurrent streaming runs too.
func TestStreamingFragmentsAndMarker(t *testing.T) {
	t.Parallel()
	d := started(t, nil)
	a := d.request("run", prog(`print('a', end='', flush=True)
print('b')
print('x'*40, end='', flush=True)
print('y'*40)
print('never')`, `"stream":true`, `"limits":{"maxLogBytes":64}`))
	b := d.request("run", prog("for i in range(5):\n    print('line', i)\nreturn 5", `"stream":true`))
	ra := d.result(d.wait(a))
	rb := d.result(d.wait(b))
	wantA := []string{"ab", strings.Repeat("x", 40), "[coderun] log capture truncated at 64 bytes"}
	if strings.Join(ra.Logs, "|") != strings.Join(wantA, "|") {
		t.Errorf("logs %q, want %q", ra.Logs, wantA)
	}
	notes := d.streamed(a)
	if len(notes) < 4 || notes[0].Text != "a" || notes[0].Continued || notes[1].Text != "b" || !notes[1].Continued ||
		notes[len(notes)-1].Text != wantA[2] || notes[len(notes)-1].Continued {
		t.Errorf("notifications %+v", notes)
	}
	if got := merge(notes); strings.Join(got, "|") != strings.Join(ra.Logs, "|") {
		t.Errorf("merged stream %q != logs %q", got, ra.Logs)
	}
	expectOK(t, rb, "5")
	if got := merge(d.streamed(b)); strings.Join(got, "|") != strings.Join(rb.Logs, "|") || len(got) != 5 {
		t.Errorf("run b: streamed %q, logs %q", got, rb.Logs)
	}
	// Every notification of a run precedes its response.
	seenA := false
	for _, e := range d.snapshot() {
		if string(e.m.ID) == a && e.m.Method == "" {
			seenA = true
		}
		if seenA && e.m.Method == "run/log" && strings.Contains(string(e.m.Params), `"runId":`+a+`,`) {
			t.Error("a run/log after its run's response")
		}
	}
}
