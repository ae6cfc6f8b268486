package protocol

import "strconv"

// Address-space room (docs/configuration.md §3 step 2 and its per-run counterpart
// in docs/configuration.md §4): the interpreter baseline comes off the top of the address space,
// and each output budget times the worst-case expansion must fit in what is
// left. config applies it at start-up and rpc to every run's effective
// limits; both wordings live here so the rule and its numbers exist once.

// MiB is the unit of addressSpaceMb.
const MiB = 1048576

// Budgetable is addressSpaceMb × 1 MiB − the interpreter baseline.
func Budgetable(mb int64) int64 { return mb*MiB - InterpreterBaseline }

// MaxBudget is the largest output budget that fits mb:
// ceil(budgetable / OutputBudgetMultiple) − 1.
func MaxBudget(mb int64) int64 {
	return (Budgetable(mb)+OutputBudgetMultiple-1)/OutputBudgetMultiple - 1
}

// BudgetFits reports budget × OutputBudgetMultiple < budgetable (no
// overflow: budgets are at most BudgetCeiling).
func BudgetFits(budget, mb int64) bool { return budget*OutputBudgetMultiple < Budgetable(mb) }

var (
	baselinePhrase = "must exceed the " + itoa(InterpreterBaseline) +
		"-byte interpreter baseline with room for the output budgets, got "
	expansionPhrase = "times the " + itoa(OutputBudgetMultiple) +
		"x worst-case Unicode expansion must fit within the "
	leftAfterPhrase = " bytes left after the " + itoa(InterpreterBaseline) + "-byte interpreter baseline of "
	mostPhrase      = "; the most it may be is "
)

// ConfigRoomBaseline is the start-up rule text (docs/configuration.md §3) when mb leaves no room,
// or "".
func ConfigRoomBaseline(mb int64) string {
	if Budgetable(mb) > 0 {
		return ""
	}
	return baselinePhrase + itoa(mb) + " MiB (" + itoa(mb*MiB) + " bytes)"
}

// ConfigRoomBudget is the start-up rule text (docs/configuration.md §3) when budget does not fit
// mb, or "". asVar names the address-space variable.
func ConfigRoomBudget(budget, mb int64, asVar string) string {
	if BudgetFits(budget, mb) {
		return ""
	}
	return expansionPhrase + itoa(Budgetable(mb)) + leftAfterPhrase + "the " + itoa(mb*MiB) + "-byte " +
		asVar + mostPhrase + itoa(MaxBudget(mb))
}

// RunRoomBaseline is the per-run message (docs/configuration.md §4) when the effective mb leaves
// no room, or "".
func RunRoomBaseline(mb int64) string {
	if Budgetable(mb) > 0 {
		return ""
	}
	return "limits.addressSpaceMb " + baselinePhrase + itoa(mb)
}

// RunRoomBudget is the per-run message (docs/configuration.md §4) for budget name/value against
// the effective mb, or "".
func RunRoomBudget(name string, budget, mb int64) string {
	if BudgetFits(budget, mb) {
		return ""
	}
	return "limits: " + name + " " + itoa(budget) + " " + expansionPhrase + itoa(Budgetable(mb)) +
		leftAfterPhrase + "addressSpaceMb " + itoa(mb) + mostPhrase + itoa(MaxBudget(mb))
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
