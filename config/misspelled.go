package config

import "strings"

// Misspelling is a variable that looks like one of the table's but is not:
// Name as set in the environment, Closest the table's name it resembles.
type Misspelling struct {
	Name, Closest string
}

// Line is the warning main logs (and the error --check prints) for m.
func (m Misspelling) Line() string {
	return m.Name + " is not a coderun-rpc variable and is ignored; did you mean " + m.Closest + "?"
}

// maxEdits is how far a name may be from a table name to be taken for a
// misspelling of it. Two edits catch a dropped, doubled or swapped letter
// and a wrong one; names further away (CODERUN_RPC_BIN, which the clients
// read, or a test's own variables) are someone else's and stay silent.
const maxEdits = 2

// misspelled lists, in environment order, every CODERUN_* variable of
// environ that is not in the table but is within maxEdits of a table name
// once case and underscores are ignored (CODERUN_MAX_WALLMS is
// CODERUN_MAX_WALL_MS).
func misspelled(environ []string) []Misspelling {
	known := make(map[string]bool, len(table))
	for _, v := range table {
		known[v.name] = true
	}
	var out []Misspelling
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if known[name] || !strings.HasPrefix(name, Prefix+"_") {
			continue
		}
		if closest, ok := closestName(name); ok {
			out = append(out, Misspelling{Name: name, Closest: closest})
		}
	}
	return out
}

// closestName is the table name nearest to name (the first of equals, in
// table order), when it is within maxEdits.
func closestName(name string) (string, bool) {
	best, bestEdits := "", maxEdits+1
	for _, v := range table {
		if d := edits(squash(name), squash(v.name)); d < bestEdits {
			best, bestEdits = v.name, d
		}
	}
	return best, best != ""
}

// squash is a name without Prefix, underscores and case.
func squash(name string) string {
	rest := strings.TrimPrefix(strings.ToUpper(name), Prefix+"_")
	return strings.ReplaceAll(rest, "_", "")
}

// edits is the optimal-string-alignment distance between a and b: the
// fewest insertions, deletions, substitutions and swaps of two neighbouring
// bytes that turn a into b. Names are short ASCII, so the two-row table
// costs nothing worth a library.
func edits(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
