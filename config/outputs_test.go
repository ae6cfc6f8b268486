package config

import (
	"errors"
	"testing"
)

// C401: the files and outputs budgets: defaults, ceilings and the address-space room.
func TestFileAndOutputBudgets(t *testing.T) {
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxFileBytes != 16<<20 || c.Limits.MaxOutputBytes != 8<<20 {
		t.Fatalf("defaults: maxFileBytes %d, maxOutputBytes %d", c.Limits.MaxFileBytes, c.Limits.MaxOutputBytes)
	}
	cases := []struct {
		env  map[string]string
		bad  string
		rule string
	}{
		{map[string]string{VarMaxFileBytes: "1073741825"}, VarMaxFileBytes, "must be at most 1073741824"},
		{map[string]string{VarMaxOutputBytes: "50331649"}, VarMaxOutputBytes,
			"must be at most 50331648 (one base64 item must fit an fd-3 frame)"},
		{map[string]string{VarAddressSpaceMB: "128", VarMaxOutputBytes: "8388608"}, VarMaxOutputBytes,
			"times the 12x worst-case Unicode expansion must fit within the 67108864 bytes left after the " +
				"67108864-byte interpreter baseline of the 134217728-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 5592405"},
	}
	for _, k := range cases {
		_, err := load(t, k.env)
		var ce *Error
		if !errors.As(err, &ce) || ce.Var != k.bad || ce.Rule != k.rule {
			t.Errorf("%v: got %v, want %s: %s", k.env, err, k.bad, k.rule)
		}
	}
	if c, err := load(t, map[string]string{VarMaxFileBytes: "1073741824", VarMaxOutputBytes: "1"}); err != nil ||
		c.Limits.MaxOutputBytes != 1 {
		t.Errorf("the extremes are refused: %v", err)
	}
}
