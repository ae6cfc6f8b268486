package protocol

import "testing"

// TestMaxBudgetTable pins the largest legal budget per address space
// (docs/configuration.md §3 step 2) and that it is exactly the edge of BudgetFits.
func TestMaxBudgetTable(t *testing.T) {
	for mb, want := range map[int64]int64{256: 16777215, 384: 27962026, 400: 29360127, 512: 39146837,
		1024: 83886079, 2048: 173364565, 4096: 352321535} {
		if got := MaxBudget(mb); got != want || !BudgetFits(want, mb) || BudgetFits(want+1, mb) {
			t.Errorf("MaxBudget(%d) = %d, want %d", mb, got, want)
		}
	}
}

// TestRoomMessages pins both wordings of the room rule; "" means it holds.
func TestRoomMessages(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ConfigRoomBaseline(64), "must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64 MiB (67108864 bytes)"},
		{ConfigRoomBaseline(65), ""},
		{ConfigRoomBudget(50000000, 256, "CODERUN_ADDRESS_SPACE_MB"), "times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of the 268435456-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 16777215"},
		{ConfigRoomBudget(16777215, 256, "X"), ""},
		{RunRoomBaseline(64), "limits.addressSpaceMb must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64"},
		{RunRoomBaseline(512), ""},
		{RunRoomBudget("maxLogBytes", 16777216, 256), "limits: maxLogBytes 16777216 times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of addressSpaceMb 256; the most it may be is 16777215"},
		{RunRoomBudget("maxValueBytes", 16777215, 256), ""},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
