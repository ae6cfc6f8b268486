package wire

import (
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/typed"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// paramsError is a −32602 rejection with the exact message of
// docs/protocol.md §3.4 / docs/configuration.md §4.
type paramsError struct{ msg string }

func (e *paramsError) Error() string { return e.msg }

func reject(msg string) error { return &paramsError{msg} }

// ValidateRun checks run params in the order of docs/protocol.md §3.4 (the
// rows of runParams) and returns the first violation. raw is nil when params
// were absent. A run's "egress" is refused: ValidateRunEgress knows the
// daemon's policy.
func ValidateRun(raw []byte, cfg protocol.Limits, allow wheelset.AllowList) (protocol.RunParams, error) {
	return ValidateRunEgress(raw, cfg, allow, nil)
}

// ValidateRunEgress is ValidateRun with the daemon's egress policy (nil:
// none), which the run's "egress" member may only narrow.
func ValidateRunEgress(raw []byte, cfg protocol.Limits, allow wheelset.AllowList, daemon *egress.Policy) (protocol.RunParams, error) {
	return validateParams(raw, runParams, validation{limits: cfg, packages: allow, egress: daemon})
}

// DescribeParams are validated bindings/describe params.
type DescribeParams struct {
	Bindings []protocol.Namespace
	Limits   protocol.Limits
	Packages []string
	Egress   *egress.Policy // the run's egress policy: its narrowing, else the daemon's (nil: none)
}

// ValidateDescribe checks bindings/describe params: run's rules for
// "bindings", "limits", "egress" and "packages", in run's order, with run's
// messages; daemon is the daemon's egress policy (nil: none).
func ValidateDescribe(raw []byte, cfg protocol.Limits, allow wheelset.AllowList, daemon *egress.Policy) (DescribeParams, error) {
	p, err := validateParams(raw, describeRows, validation{limits: cfg, packages: allow, egress: daemon})
	d := DescribeParams{Bindings: p.Bindings, Limits: p.Limits, Packages: p.Packages, Egress: daemon}
	if own, ok := p.Egress.(*egress.Policy); ok && own != nil {
		d.Egress = own
	}
	return d, err
}

// lastOf is, for each of names, the member of ms called that (the last one
// when the name repeats, as JSON.parse keeps), nil when there is none: one
// pass over ms.
func lastOf(ms []wireguard.Member, names ...string) []*wireguard.Member {
	out := make([]*wireguard.Member, len(names))
	for i := range ms {
		if k := slices.Index(names, ms[i].Name); k >= 0 {
			out[k] = &ms[i]
		}
	}
	return out
}

// given reports whether m is present and not null.
func given(m *wireguard.Member) bool {
	return m != nil && wireguard.KindOf(m.Value) != wireguard.KindNull
}

// value is m's raw value, nil when m is absent (no decoder accepts nil).
func value(m *wireguard.Member) []byte {
	if m == nil {
		return nil
	}
	return m.Value
}

// optionalLimits validates "limits" when present and not null.
func optionalLimits(m *wireguard.Member, cfg protocol.Limits) (protocol.Limits, error) {
	if !given(m) {
		return protocol.Limits{}, nil
	}
	return validateLimits(m.Value, cfg)
}

// optionalEgress validates "egress" when present and not null: a narrowing
// of the daemon's policy (docs/containment.md §6). Its result is nil or a
// *egress.Policy.
func optionalEgress(m *wireguard.Member, daemon *egress.Policy) (protocol.EgressPolicy, error) {
	if !given(m) {
		return nil, nil
	}
	if daemon == nil {
		return nil, reject("egress: the daemon has no egress policy (CODERUN_EGRESS), so a run has no egress to narrow")
	}
	own, err := daemon.Narrow(m.Value)
	if err != nil {
		return nil, reject(err.Error())
	}
	return own, nil
}

// optionalSecrets validates "secrets" when present and not null: the
// client's secrets, bound to hosts within the run's effective allow list
// (its own narrowing, else the daemon's). The result is that policy with
// the secrets added, the run's egress policy.
func optionalSecrets(m *wireguard.Member, run protocol.EgressPolicy, daemon *egress.Policy) (protocol.EgressPolicy, error) {
	if !given(m) {
		return run, nil
	}
	if daemon == nil {
		return nil, reject("secrets: the daemon has no egress policy (CODERUN_EGRESS), so a run reaches no host")
	}
	base := daemon
	if own, ok := run.(*egress.Policy); ok && own != nil {
		base = own
	}
	withSecrets, err := base.WithSecrets(m.Value)
	if err != nil {
		return nil, reject(err.Error())
	}
	return withSecrets, nil
}

func validateBindings(m *wireguard.Member) ([]protocol.Namespace, error) {
	out := []protocol.Namespace{}
	if !given(m) {
		return out, nil
	}
	elems, ok := wireguard.ValidElements(m.Value)
	if !ok {
		return nil, reject("bindings must be an array")
	}
	injected := map[string]bool{}     // every global and error class so far
	globals := map[string]bool{}      // earlier globals
	errorClasses := map[string]bool{} // earlier errorClass names
	for i, el := range elems {
		ns, err := validateBinding(i, el, injected, globals, errorClasses)
		if err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, nil
}

func validateBinding(i int, raw []byte, injected, globals, errorClasses map[string]bool) (protocol.Namespace, error) {
	var ns protocol.Namespace
	at := "bindings[" + strconv.Itoa(i) + "]"
	ms, ok := wireguard.ValidMembers(raw)
	if !ok {
		return ns, reject(at + " must be an object")
	}
	f := lastOf(ms, "global", "errorClass", "mcp", "functions")
	g, ok := wireguard.DecodeString(value(f[0]))
	if !ok {
		return ns, reject(at + ".global must be a string")
	}
	q := quote(g)
	switch {
	case !usableIdentifier(g):
		return ns, reject(at + ".global " + q + " is not a usable Python identifier")
	case globals[g]:
		return ns, reject(at + ".global " + q + " is a duplicate binding global")
	case runtimeOwned[g]:
		return ns, reject(at + ".global " + q + " collides with a runtime-owned global")
	case errorClasses[g]:
		return ns, reject(at + ".global " + q + " collides with another injected global")
	}
	ns.Global = g
	if given(f[1]) {
		ec, err := validateErrorClass(at, f[1].Value, g, injected)
		if err != nil {
			return ns, err
		}
		ns.ErrorClass = ec
	}
	isMCP, err := validateMCPMember(at, f[2], f[3] != nil, &ns)
	if !isMCP {
		err = validateFunctions(at, f[3], &ns)
	}
	if err != nil {
		return ns, err
	}
	if sharesMCPClass(&ns, injected, errorClasses) {
		ns.ErrorClass = mcpErrorClass(ns.MCP)
	}
	globals[g], injected[g] = true, true
	if ns.ErrorClass != nil {
		errorClasses[ns.ErrorClass.Name], injected[ns.ErrorClass.Name] = true, true
	}
	return ns, nil
}

func validateErrorClass(at string, raw []byte, global string, injected map[string]bool) (*protocol.ErrorClass, error) {
	at += ".errorClass"
	ms, ok := wireguard.ValidMembers(raw)
	if !ok {
		return nil, reject(at + " must be an object")
	}
	f := lastOf(ms, "name", "memberNameProperty")
	name, ok := wireguard.DecodeString(value(f[0]))
	if !ok {
		return nil, reject(at + ".name must be a string")
	}
	qn := quote(name)
	if !usableIdentifier(name) {
		return nil, reject(at + ".name " + qn + " is not a usable Python identifier")
	}
	prop, ok := wireguard.DecodeString(value(f[1]))
	switch {
	case !ok:
		return nil, reject(at + ".memberNameProperty must be a string")
	case prop == "":
		return nil, reject(at + ".memberNameProperty must be a non-empty attribute name")
	case reservedMembers[prop] || isDunder(prop):
		return nil, reject(at + ".memberNameProperty " + quote(prop) + " is a reserved error member and cannot be assigned")
	case runtimeOwned[name]:
		return nil, reject(at + ".name " + qn + " collides with a runtime-owned global")
	case injected[name] || name == global:
		return nil, reject(at + ".name " + qn + " collides with another injected global")
	}
	return &protocol.ErrorClass{Name: name, MemberNameProperty: prop}, nil
}

// validateFunctions fills ns.Names and, when a function is typed (an object
// entry, docs/protocol-typed.md §10.1), ns.Signatures and ns.Checks. A string entry keeps the
// old path: an untyped run never reaches the typed package.
func validateFunctions(at string, fm *wireguard.Member, ns *protocol.Namespace) error {
	var elems [][]byte
	ok := fm != nil
	if ok {
		elems, ok = wireguard.ValidElements(fm.Value)
	}
	if !ok {
		return reject(at + ".functions must be an array of names or function objects")
	}
	ns.Names = make([]string, 0, len(elems))
	var fns []*typed.Function // aligned with ns.Names once a function is typed
	seen := map[string]bool{}
	for j, el := range elems {
		fat := at + ".functions[" + strconv.Itoa(j) + "]"
		name, fn, err := functionEntry(fat, el)
		if err != nil {
			return err
		}
		if seen[name] {
			return reject(fat + " " + quote(name) + " is a duplicate function name")
		}
		seen[name] = true
		ns.Names = append(ns.Names, name)
		if fn != nil && fns == nil {
			fns = make([]*typed.Function, len(elems))
		}
		if fns != nil {
			fns[j] = fn
		}
	}
	if fns != nil {
		addTyped(ns, fns)
	}
	return nil
}

// functionEntry reads one functions entry: a name, or a declaration compiled
// by the typed package (nil for a name).
func functionEntry(at string, el []byte) (string, *typed.Function, error) {
	if name, ok := wireguard.DecodeString(el); ok {
		return name, nil, nil
	}
	if wireguard.KindOf(el) != wireguard.KindObject {
		return "", nil, reject(at + " must be a name or {name, description?, parameters?, returns?}")
	}
	fn, err := typed.Compile(at, el)
	if err != nil {
		return "", nil, reject(err.Error())
	}
	return fn.Name, fn, nil
}

// addTyped sets ns.Checks and, when a function declares parameters,
// ns.Signatures, both aligned with ns.Names (nil for an untyped function).
// Only a namespace with a typed function has them, so an untyped namespace's
// boot frame is unchanged.
func addTyped(ns *protocol.Namespace, fns []*typed.Function) {
	ns.Checks = make([]protocol.Checker, len(fns))
	sigs := make([]*protocol.Signature, len(fns))
	hasSig := false
	for j, fn := range fns {
		if fn == nil {
			continue
		}
		ns.Checks[j] = fn
		sigs[j] = fn.Method(ns.Global).Signature
		hasSig = hasSig || sigs[j] != nil
	}
	if hasSig {
		ns.Signatures = sigs
	}
}

var limitNames = []string{"cpuSeconds", "maxWallMs", "addressSpaceMb", "maxLogBytes", "maxValueBytes",
	"maxFileBytes", "maxOutputBytes", "maxDiskMb", "maxUpstreamBytes",
	"maxEgressRequests", "maxEgressBytes"}

// validateLimits applies docs/configuration.md §4. Zero fields of the result mean
// "not given".
func validateLimits(raw []byte, cfg protocol.Limits) (protocol.Limits, error) {
	var l protocol.Limits
	ms, ok := wireguard.ValidMembers(raw)
	if !ok {
		return l, reject("limits must be an object")
	}
	given := make([]*wireguard.Member, len(limitNames)) // one pass: each limit's member, the last of its name
	var unknown []string
	for i := range ms {
		if k := slices.Index(limitNames, ms[i].Name); k >= 0 {
			given[k] = &ms[i]
		} else {
			unknown = append(unknown, ms[i].Name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return l, reject("limits." + unknown[0] + " is not a known limit")
	}
	caps := []int64{cfg.CPUSeconds, cfg.MaxWallMs, cfg.AddressSpaceMb, cfg.MaxLogBytes, cfg.MaxValueBytes,
		cfg.MaxFileBytes, cfg.MaxOutputBytes, cfg.MaxDiskMb, cfg.MaxUpstreamBytes,
		cfg.MaxEgressRequests, cfg.MaxEgressBytes}
	dst := []*int64{&l.CPUSeconds, &l.MaxWallMs, &l.AddressSpaceMb, &l.MaxLogBytes, &l.MaxValueBytes,
		&l.MaxFileBytes, &l.MaxOutputBytes, &l.MaxDiskMb, &l.MaxUpstreamBytes,
		&l.MaxEgressRequests, &l.MaxEgressBytes}
	for k, name := range limitNames {
		m := given[k]
		if m == nil {
			continue
		}
		v, err := limitValue(name, m.Value, caps[k])
		if err != nil {
			return l, err
		}
		*dst[k] = v
	}
	return l, crossCheck(l, cfg)
}

// limitValue reads one limit: a JSON number with a positive integral value
// (1000, 1e3 and 1000.0 alike), at most the configured cap.
func limitValue(name string, raw []byte, limit int64) (int64, error) {
	bad := reject("limits." + name + " must be a positive integer, got " + string(raw))
	if wireguard.KindOf(raw) != wireguard.KindNumber {
		return 0, bad
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f <= 0 || f != math.Trunc(f) {
		return 0, bad
	}
	spelled := string(appendInteger(nil, f))
	if f > float64(limit) {
		return 0, reject("limits." + name + " must not exceed the daemon's configured " +
			strconv.FormatInt(limit, 10) + ", got " + spelled)
	}
	v := int64(f)
	if name == "maxLogBytes" && v < protocol.MinMaxLogBytes {
		return 0, reject("limits.maxLogBytes must be at least " + strconv.Itoa(protocol.MinMaxLogBytes) + ", got " + spelled)
	}
	return v, nil
}

// crossCheck applies the address-space room rules to the effective limits.
func crossCheck(l, cfg protocol.Limits) error {
	eff := effective
	mb := eff(l.AddressSpaceMb, cfg.AddressSpaceMb)
	if msg := protocol.RunRoomBaseline(mb); msg != "" {
		return reject(msg)
	}
	if msg := protocol.RunRoomBudget("maxLogBytes", eff(l.MaxLogBytes, cfg.MaxLogBytes), mb); msg != "" {
		return reject(msg)
	}
	if msg := protocol.RunRoomBudget("maxValueBytes", eff(l.MaxValueBytes, cfg.MaxValueBytes), mb); msg != "" {
		return reject(msg)
	}
	if msg := protocol.RunRoomBudget("maxOutputBytes", eff(l.MaxOutputBytes, cfg.MaxOutputBytes), mb); msg != "" {
		return reject(msg)
	}
	return nil
}

// effective is a run's limit v when given (non-zero), else the configured c.
func effective(v, c int64) int64 {
	if v > 0 {
		return v
	}
	return c
}
