package config

import "strconv"

// Address-space room (CHILD-CONTRACT §4.1 step 2 and its per-run counterpart
// in §4.2): the interpreter baseline comes off the top, and each output
// budget times the 12x worst-case expansion must fit in what is left.

const (
	mib              = 1048576
	baseline         = 67108864
	expansionFactor  = 12
	baselinePhrase   = "must exceed the 67108864-byte interpreter baseline with room for the output budgets, got "
	expansionPhrase  = " times the 12x worst-case Unicode expansion must fit within the "
	leftAfterPhrase  = " bytes left after the 67108864-byte interpreter baseline of "
	mostItMayBePhase = "; the most it may be is "
)

// Budgetable is addressSpaceMb × 1 MiB − the interpreter baseline.
func Budgetable(mb int64) int64 { return mb*mib - baseline }

// MaxBudget is the largest output budget that fits mb: ceil(budgetable/12) − 1.
func MaxBudget(mb int64) int64 {
	b := Budgetable(mb)
	return (b+expansionFactor-1)/expansionFactor - 1
}

// BudgetFits reports budget × 12 < budgetable (no overflow: budgets are
// ≤ 67108800).
func BudgetFits(budget, mb int64) bool { return budget*expansionFactor < Budgetable(mb) }

// ConfigRoomBaseline returns the start-up rule text when mb leaves no room.
func ConfigRoomBaseline(mb int64) string {
	if Budgetable(mb) > 0 {
		return ""
	}
	return baselinePhrase + itoa(mb) + " MiB (" + itoa(mb*mib) + " bytes)"
}

// ConfigRoomBudget returns the start-up rule text when budget does not fit mb.
func ConfigRoomBudget(budget, mb int64) string {
	if BudgetFits(budget, mb) {
		return ""
	}
	return "times the 12x worst-case Unicode expansion must fit within the " + itoa(Budgetable(mb)) +
		leftAfterPhrase + "the " + itoa(mb*mib) + "-byte CODERUN_ADDRESS_SPACE_MB" +
		mostItMayBePhase + itoa(MaxBudget(mb))
}

// RunRoomBaseline is the per-run message (§4.2) when the effective mb leaves
// no room, or "".
func RunRoomBaseline(mb int64) string {
	if Budgetable(mb) > 0 {
		return ""
	}
	return "limits.addressSpaceMb " + baselinePhrase + itoa(mb)
}

// RunRoomBudget is the per-run message (§4.2) for budget name/value against
// the effective mb, or "".
func RunRoomBudget(name string, budget, mb int64) string {
	if BudgetFits(budget, mb) {
		return ""
	}
	return "limits: " + name + " " + itoa(budget) + expansionPhrase + itoa(Budgetable(mb)) +
		leftAfterPhrase + "addressSpaceMb " + itoa(mb) + mostItMayBePhase + itoa(MaxBudget(mb))
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
