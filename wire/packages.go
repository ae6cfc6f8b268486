package wire

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// packagesVar is the allow-list's variable, named by a refusal.
const packagesVar = "CODERUN_PACKAGES"

// validatePackages checks "packages" (run, session/open,
// docs/packages.md §2): absent, null or an array of at most
// wheelset.MaxRequirements strings, each a requirement the allow-list
// admits, no name twice. It returns them in normal form.
func validatePackages(m *wireguard.Member, allow wheelset.AllowList) ([]string, error) {
	if !given(m) {
		return nil, nil
	}
	elems, ok := wireguard.ValidElements(m.Value)
	if !ok {
		return nil, reject("packages must be an array of strings")
	}
	if len(elems) > wheelset.MaxRequirements {
		return nil, reject("packages must have at most " + strconv.Itoa(wheelset.MaxRequirements) + " entries")
	}
	out := make([]string, 0, len(elems))
	seen := map[string]bool{}
	for i, el := range elems {
		at := "packages[" + strconv.Itoa(i) + "]"
		text, ok := wireguard.DecodeString(el)
		if !ok {
			return nil, reject(at + " must be a string")
		}
		r, err := wheelset.ParseRequirement(text)
		switch {
		case err != nil:
			return nil, reject(at + " " + wheelset.RequirementRule)
		case !allow.Enabled():
			return nil, reject(at + " names " + r.Name + ", but this daemon installs no packages (" + packagesVar + " is empty)")
		case !allow.Allows(r.Name):
			return nil, reject(at + " names " + r.Name + ", which " + packagesVar + " does not allow")
		case seen[r.Name]:
			return nil, reject(at + " names " + r.Name + " a second time")
		}
		seen[r.Name] = true
		out = append(out, r.String())
	}
	return out, nil
}
