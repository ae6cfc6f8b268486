package wireguard

import (
	"strings"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Capture is the daemon's log ledger (docs/child-protocol-wire.md §2.6) fed by rebuilt fd-3 log frames and by
// stray native output (docs/child-protocol-daemon.md §4.5). It bills every entry by its serialized JSON cost against
// remaining = maxLogBytes − 1, keeps the open hold (a line flushed in fragments), and
// emits the marker exactly once, last. Not safe for concurrent use: the caller
// serializes. onEvent (may be nil) receives every ledger change in ledger order
// (docs/child-protocol-wire.md §2.6.4); empty fragments produce none.
type Capture struct {
	maxLogBytes int64
	remaining   int64
	charged     int64
	onEvent     func(protocol.LogEvent)

	entries   []string        // admitted entries; the hold's slot holds "" while open
	holding   bool            // an open hold exists
	holdIndex int             // its position in entries, fixed at its first fragment
	hold      strings.Builder // its text so far
	truncated bool            // the marker has been appended; capture has stopped

	stray [2]residual // stdout, stderr
}

// NewCapture returns an empty ledger for maxLogBytes (≥ 64 by configuration).
func NewCapture(maxLogBytes int64, onEvent func(protocol.LogEvent)) *Capture {
	return &Capture{maxLogBytes: maxLogBytes, remaining: maxLogBytes - 1, onEvent: onEvent}
}

// Log applies one rebuilt fd-3 log frame (docs/child-protocol-wire.md §2.6.2 rules 1–4). After truncation it is
// a no-op.
func (c *Capture) Log(text string, open, truncated bool) {
	switch {
	case c.truncated:
	case truncated:
		c.truncate()
	case open && !c.holding:
		c.openHold(text)
	case open:
		c.extendHold(text, false)
	case c.holding:
		c.extendHold(text, true)
	default:
		c.admit(text)
	}
}

// CloseHold turns a still-open hold into a finished entry as it stands (rule 5; it
// was billed fragment by fragment, so nothing more is charged). Called at the
// decision; fd-3 log frames after it are the caller's to drop.
func (c *Capture) CloseHold() {
	if c.holding {
		c.entries[c.holdIndex] = c.hold.String()
		c.holding = false
		c.hold.Reset()
	}
}

// Entries returns the logs: every entry in ledger order (an open hold as it stands),
// then the marker if capture was truncated. After CloseHold and the end of stray
// capture it is the run's final logs. The slice is fresh and never nil.
func (c *Capture) Entries() []string {
	out := make([]string, len(c.entries), len(c.entries)+1)
	copy(out, c.entries)
	if c.holding {
		out[c.holdIndex] = c.hold.String()
	}
	if c.truncated {
		out = append(out, protocol.LogMarker(c.maxLogBytes))
	}
	return out
}

// Remaining is what the ledger may still bill: the most a log frame's text
// can still bring in (0 once truncated).
func (c *Capture) Remaining() int64 {
	if c.truncated {
		return 0
	}
	return c.remaining
}

// Charged is the number of bytes billed to the ledger (stats.logBytes); the marker is
// never charged.
func (c *Capture) Charged() int64 { return c.charged }

// bill charges n bytes if they fit the remaining ledger.
func (c *Capture) bill(n int64) bool {
	if n > c.remaining {
		return false
	}
	c.remaining -= n
	c.charged += n
	return true
}

// billText bills text's JSON cost plus extra (+1 for a new entry, −2 for a fragment
// joining a hold). The raw length + 2 is a lower bound of the cost, so a text that
// cannot fit is refused without walking it.
func (c *Capture) billText(text string, extra int64) bool {
	if int64(len(text))+2+extra > c.remaining {
		return false
	}
	return c.bill(stringCost(text) + extra)
}

// admit appends an ordinary entry (rule 4), or truncates if it does not fit.
func (c *Capture) admit(text string) {
	if !c.billText(text, 1) {
		c.truncate()
		return
	}
	c.entries = append(c.entries, text)
	c.emit(len(c.entries)-1, text, false)
}

// openHold handles a first open fragment (rule 2). An empty one is billed 3 and
// opens nothing.
func (c *Capture) openHold(text string) {
	if !c.billText(text, 1) {
		c.truncate()
		return
	}
	if text == "" {
		return
	}
	c.holding, c.holdIndex = true, len(c.entries)
	c.entries = append(c.entries, "")
	c.hold.WriteString(text)
	c.emit(c.holdIndex, text, false)
}

// extendHold handles a continuation (rule 2) or, when closing, the closing fragment
// that completes the merged entry (rule 3). Both bill content bytes only.
func (c *Capture) extendHold(text string, closing bool) {
	if !c.billText(text, -2) {
		c.truncate()
		return
	}
	c.hold.WriteString(text)
	if text != "" {
		c.emit(c.holdIndex, text, true)
	}
	if closing {
		c.CloseHold()
	}
}

// truncate commits any held prefix as its own entry, appends the marker and stops all
// further capture, stray residuals included (rule 1).
func (c *Capture) truncate() {
	c.CloseHold()
	c.truncated = true
	c.stray = [2]residual{}
	c.emit(len(c.entries), protocol.LogMarker(c.maxLogBytes), false)
}

func (c *Capture) emit(index int, text string, continued bool) {
	if c.onEvent != nil {
		c.onEvent(protocol.LogEvent{Index: index, Text: text, Continued: continued})
	}
}
