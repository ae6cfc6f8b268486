package protocol

import "testing"

func TestLogMarker(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{65536, "[coderun] log capture truncated at 65536 bytes"},
		{1, "[coderun] log capture truncated at 1 bytes"},
	} {
		if got := LogMarker(c.n); got != c.want {
			t.Errorf("LogMarker(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if BudgetCeiling != 67108800 {
		t.Errorf("BudgetCeiling = %d", BudgetCeiling)
	}
}
