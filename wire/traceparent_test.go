package wire

import (
	"strings"
	"testing"
)

func TestTraceparent(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{`"` + good + `"`, true},
		{`null`, true},
		{`"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"`, true}, // a later version may add fields
		{`"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"`, false},
		{`"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, false},
		{`"00-00000000000000000000000000000000-00f067aa0ba902b7-01"`, false},
		{`"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"`, false},
		{`"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"`, false},
		{`"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`, false},
		{`"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"`, false},
		{`1`, false},
	} {
		p, err := ValidateRun([]byte(`{"program":"","traceparent":`+tc.value+`}`), cfgLimits, noPackages)
		if tc.ok != (err == nil) {
			t.Errorf("traceparent %s: %v", tc.value, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "traceparent must be a W3C traceparent string") {
			t.Errorf("traceparent %s: message %q does not name the member", tc.value, err)
		}
		if tc.value == `"`+good+`"` && p.Traceparent != good {
			t.Errorf("Traceparent = %q", p.Traceparent)
		}
	}
}
