package wireguard

import (
	"math"
	"strings"
	"testing"
)

// docs/child-protocol-wire.md §2.7 number spelling examples and C217.
func TestAppendNumber(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1.0, "1"},
		{100.0, "100"},
		{2.0, "2"},
		{1e-7, "1e-7"},
		{1e-6, "0.000001"},
		{1e-5, "0.00001"},
		{1e21, "1e+21"},
		{-2.5e-8, "-2.5e-8"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{1 << 60, "1152921504606846976"},
		{1 << 53, "9007199254740992"},
		{-(1 << 64), "-18446744073709551616"},
		{999999999999999868928, "999999999999999868928"}, // largest double below 1e21
		{1.5, "1.5"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{123.456, "123.456"},
		{1.2345e-6, "0.0000012345"},
		{1.5e300, "1.5e+300"},
		{1e22, "1e+22"},
		{1.2345678901234568e20, "123456789012345683968"}, // integral: exact digits, not 17 significant
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{math.NaN(), "NaN"},
	} {
		if got := string(AppendNumber(nil, c.f)); got != c.want {
			t.Errorf("AppendNumber(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// C209: the unsafe-integer scan.
func TestUnsafeInteger(t *testing.T) {
	digits400 := "1" + strings.Repeat("7", 399)
	for _, c := range []struct {
		tok    string
		unsafe bool
	}{
		{"9007199254740993", true},
		{"-9007199254740993", true},
		{digits400, true},
		{"9007199254740992", false},
		{"18446744073709551616", false},
		{"9007199254740991", false},
		{"-9007199254740991", false},
		{"123456789012345", false},
		{"1152921504606846976", false},
		{"1152921504606846977", true},
	} {
		if got := unsafeInteger([]byte(c.tok)); got != c.unsafe {
			t.Errorf("unsafeInteger(%s) = %v", c.tok, got)
		}
	}
}
