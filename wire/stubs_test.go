package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
	"github.com/coderun-rpc/coderun-rpc/typed"
)

const searchDecl = `{"name":"search","description":"Find documents.","parameters":{"type":"object",` +
	`"properties":{"q":{"type":"string"},"limit":{"type":"integer","default":10}},"required":["q"]},` +
	`"returns":{"type":"array","items":{"type":"string"}}}`

// A typed namespace carries checks and signatures aligned with its names; an
// untyped one carries neither, so its boot frame is unchanged.
func TestTypedNamespaces(t *testing.T) {
	p, err := ValidateRun([]byte(`{"program":"","bindings":[{"global":"plain","functions":["a"]},`+
		`{"global":"tools","functions":["old",`+searchDecl+`,{"name":"count","returns":{"type":"integer"}}]}]}`), cfgLimits, noPackages)
	if err != nil {
		t.Fatal(err)
	}
	if plain := p.Bindings[0]; plain.Checks != nil || plain.Signatures != nil {
		t.Errorf("untyped namespace: %+v", plain)
	}
	ns := p.Bindings[1]
	if strings.Join(ns.Names, ",") != "old,search,count" || len(ns.Checks) != 3 || len(ns.Signatures) != 3 {
		t.Fatalf("typed namespace: %+v", ns)
	}
	if ns.Checks[0] != nil || ns.Checks[1] == nil || ns.Checks[2] == nil {
		t.Errorf("checks: %v", ns.Checks)
	}
	if ns.Signatures[0] != nil || ns.Signatures[2] != nil {
		t.Error("a function without parameters got a signature")
	}
	sig, _ := json.Marshal(ns.Signatures[1].Params)
	if string(sig) != `[{"name":"q","required":true},{"name":"limit","required":false,"default":"10"}]` {
		t.Errorf("params: %s", sig)
	}
	if err := ns.Checks[1].CheckArgs([]byte(`{"q":"x","limit":"5"}`)); err == nil || err.Error() != "/limit: expected integer, but got string" {
		t.Errorf("CheckArgs: %v", err)
	}
}

// fiftyTyped is a bindings array of one namespace with 50 distinct typed functions.
func fiftyTyped() string {
	fns := make([]string, 50)
	for i := range fns {
		fns[i] = strings.Replace(searchDecl, `"search"`, `"search_`+strconv.Itoa(i)+`"`, 1)
	}
	return `[{"global":"tools","functions":[` + strings.Join(fns, ",") + `]}]`
}

// BenchmarkDescribe50 is the daemon's work for bindings/describe of 50
// typed functions with nested schemas, warm cache (bench/cmd's target: 5 ms
// request to response).
func BenchmarkDescribe50(b *testing.B) {
	params := []byte(`{"bindings":` + fiftyTyped() + `}`)
	b.ReportAllocs()
	for b.Loop() {
		p, err := ValidateDescribe(params, cfgLimits, noPackages, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = typed.Render(session.EffectiveLimits(cfgLimits, p.Limits), "3.11.7", stubNamespaces(p.Bindings)).Text
	}
}

// BenchmarkValidateRun50 is run's validation of 50 typed functions, warm
// cache (part of bench/cmd's 0.5 ms budget for declaring them).
func BenchmarkValidateRun50(b *testing.B) {
	params := []byte(`{"program":"return 1","bindings":` + fiftyTyped() + `}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateRun(params, cfgLimits, noPackages); err != nil {
			b.Fatal(err)
		}
	}
}

// Remembered stubs are the stubs of exactly those bindings: a changed
// declaration, name, global or budget renders anew; the same ones are served
// as rendered.
func TestRememberedStubsMatchTheirBindings(t *testing.T) {
	other := strings.Replace(searchDecl, "Find documents.", "Find other documents.", 1)
	small := protocol.Limits{CPUSeconds: 1, MaxWallMs: 1000, AddressSpaceMb: 512, MaxLogBytes: 4096, MaxValueBytes: 4096}
	cases := []struct {
		bindings string
		limits   protocol.Limits
	}{
		{tools(`["a",` + searchDecl + `]`), cfgLimits},
		{tools(`["a",` + other + `]`), cfgLimits},
		{tools(`["b",` + searchDecl + `]`), cfgLimits},
		{`[{"global":"web","functions":["a",` + searchDecl + `]}]`, cfgLimits},
		{tools(`["a",` + searchDecl + `]`), small},
	}
	var cache stubsCache
	seen := map[string]bool{}
	for round := range 2 {
		for _, c := range cases {
			p, err := ValidateDescribe([]byte(`{"bindings":`+c.bindings+`}`), cfgLimits, noPackages, nil)
			if err != nil {
				t.Fatal(err)
			}
			nss := p.Bindings
			want := typed.Render(c.limits, "3.11.7", stubNamespaces(nss)).Text
			if got := cache.text(c.limits, "3.11.7", stubNamespaces(nss)); got != want {
				t.Errorf("round %d, %s: remembered stubs differ from a fresh render:\n%s\nwant\n%s", round, c.bindings, got, want)
			}
			seen[want] = true
		}
	}
	if len(seen) != len(cases) {
		t.Errorf("%d distinct stubs for %d distinct requests", len(seen), len(cases))
	}
}
