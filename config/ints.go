package config

import (
	"errors"
	"math"
	"strconv"
)

// Integer variables are decimal digits only (CHILD-CONTRACT §4.1): no sign, no
// base prefix, no leading zero, no whitespace, no underscore. envconfig parses
// plain integer fields with base 0, so every integer variable uses one of the
// decoder types below instead (Appendix B item 7).

// bounds describes one integer variable's rules. The type parameter of Int
// selects it, so envconfig's Decoder (which sees only the text) knows them.
type bounds interface {
	// nonNegative: 0 is legal and the spelling rule reads "non-negative".
	nonNegative() bool
	// ceiling returns the largest legal value and the rule text above it.
	ceiling() (int64, string)
	// floor returns the smallest legal value and its rule (0: none).
	floor() (int64, string)
}

// Int is an integer configuration variable. Set reports whether envconfig
// decoded a value (from the environment or a default tag).
type Int[B bounds] struct {
	Value int64
	Raw   string
	Set   bool
}

// Decode implements envconfig.Decoder.
func (x *Int[B]) Decode(s string) error {
	var b B
	x.Raw = s
	v, ok := parseDecimal(s)
	if !ok || (v == 0 && !b.nonNegative()) {
		if b.nonNegative() {
			return errors.New("must be a non-negative integer")
		}
		return errors.New("must be a positive integer")
	}
	if limit, rule := b.ceiling(); v > limit {
		return errors.New(rule)
	}
	if limit, rule := b.floor(); v < limit {
		return errors.New(rule)
	}
	x.Value, x.Set = v, true
	return nil
}

// parseDecimal accepts "0" or a digit string without a leading zero. One
// beyond int64 saturates, so it meets its variable's ceiling rule (every
// ceiling is below MaxInt64) rather than a spelling rule it obeys.
func parseDecimal(s string) (int64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, true
	}
	return v, err == nil
}

const (
	ruleFrameBudget = "must be at most 67108800 (a frame carrying it must fit the 67108864-byte fd-3 frame cap)"
	ruleCount       = "must be at most 9007199254740991"
	maxCount        = 9007199254740991
)

type noFloor struct{}

func (noFloor) floor() (int64, string) { return 0, "" }

type positive struct{ noFloor }

func (positive) nonNegative() bool { return false }

type nonNeg struct{ noFloor }

func (nonNeg) nonNegative() bool { return true }

// CPUSecondsRule … each type below is one variable's rule set.
type CPUSecondsRule struct{ positive }

func (CPUSecondsRule) ceiling() (int64, string) {
	return 9007199254740990, "must be at most 9007199254740990 (it and its +1 hard limit must stay exact JSON integers)"
}

type WallRule struct{ positive }

func (WallRule) ceiling() (int64, string) {
	return 9223372036854, "must be at most 9223372036854 (the largest whole-millisecond time.Duration)"
}

type AddressSpaceRule struct{ positive }

func (AddressSpaceRule) ceiling() (int64, string) {
	return 8589934591, "must be at most 8589934591 (its byte count must stay an exact JSON integer)"
}

type LogBytesRule struct{ positive }

func (LogBytesRule) ceiling() (int64, string) { return 67108800, ruleFrameBudget }
func (LogBytesRule) floor() (int64, string) {
	return 64, "must be at least 64 (a marker-only log must fit)"
}

type ValueBytesRule struct{ positive }

func (ValueBytesRule) ceiling() (int64, string) { return 67108800, ruleFrameBudget }

type GraceRule struct{ positive }

func (GraceRule) ceiling() (int64, string) {
	return 9223372034854, "must be at most 9223372034854 (graceMs + 2000 must stay a valid time.Duration)"
}

type PositiveCountRule struct{ positive }

func (PositiveCountRule) ceiling() (int64, string) { return maxCount, ruleCount }

type CountRule struct{ nonNeg }

func (CountRule) ceiling() (int64, string) { return maxCount, ruleCount }

// Choice is a string variable restricted to a fixed set of words.
type Choice[C choices] struct {
	Value string
	Set   bool
}

type choices interface {
	words() []string
	rule() string
}

// Decode implements envconfig.Decoder.
func (x *Choice[C]) Decode(s string) error {
	var c C
	for _, w := range c.words() {
		if s == w {
			x.Value, x.Set = s, true
			return nil
		}
	}
	return errors.New(c.rule())
}

type IsolationWords struct{}

func (IsolationWords) words() []string { return []string{"process", "sandbox"} }
func (IsolationWords) rule() string    { return `must be "process" or "sandbox"` }

type StartWords struct{}

func (StartWords) words() []string { return []string{"auto", "fork", "spawn"} }
func (StartWords) rule() string    { return `must be "auto", "fork" or "spawn"` }

type LevelWords struct{}

func (LevelWords) words() []string { return []string{"debug", "info", "warn", "error"} }
func (LevelWords) rule() string    { return "must be one of debug, info, warn, error" }

// Text is a string variable that records whether it was set at all (so the
// empty string can be told from "unset").
type Text struct {
	Value string
	Set   bool
}

// Decode implements envconfig.Decoder.
func (x *Text) Decode(s string) error {
	x.Value, x.Set = s, true
	return nil
}
