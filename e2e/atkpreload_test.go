package e2e

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// credentialScanProgram returns the proxy token of the run's own
// environment and every proxy token its interpreter's memory holds
// (readable mappings read in place with ctypes, as a hostile program can).
const credentialScanProgram = `import ctypes, os, re
found = set()
pattern = re.compile(rb"coderun:([A-Za-z0-9_-]{22})@")
with open("/proc/self/maps") as f:
    maps = f.read().splitlines()
for line in maps:
    fields = line.split()
    span, perms = fields[0], fields[1]
    if not perms.startswith("r") or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
        continue
    lo, hi = (int(x, 16) for x in span.split("-"))
    if hi - lo > 1 << 28:
        continue
    for m in pattern.finditer(ctypes.string_at(lo, hi - lo)):
        found.add(m.group(1).decode())
own = re.search(r"coderun:([^@]+)@", os.environ["HTTP_PROXY"]).group(1)
return [own, sorted(found)]`

// TestC1245ForkCredentialsNotInMemory: a session fork and its source each
// hold proxy credentials of their own, and neither can read the other's out
// of its own memory (the fork is a copy of its source's at the fork).
func TestC1245ForkCredentialsNotInMemory(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(plain, _ string) string {
		return `{"allow": [{"host": "plain.test", "ports": [` + plain + `], "private": true}]}`
	})
	d := started(t, u.env)
	scan := func(sid string) (string, []string) {
		t.Helper()
		prog, _ := json.Marshal(credentialScanProgram)
		r, raw := d.egressRun(t, `{"sessionId":"`+sid+`","program":`+string(prog)+`}`)
		var pair []json.RawMessage
		var own string
		var found []string
		if json.Unmarshal(r.Value, &pair) != nil || len(pair) != 2 || json.Unmarshal(pair[0], &own) != nil || json.Unmarshal(pair[1], &found) != nil || own == "" {
			t.Fatalf("result %s", raw)
		}
		return own, found
	}
	src := d.open(`{}`)
	scan(src)
	fork := d.fork(src)
	forkOwn, forkFound := scan(fork)
	srcOwn, srcFound := scan(src)
	if forkOwn == srcOwn {
		t.Fatalf("the fork and its source share credentials")
	}
	if slices.Contains(forkFound, srcOwn) {
		t.Errorf("the fork's memory holds its source's current proxy credentials")
	}
	if slices.Contains(srcFound, forkOwn) {
		t.Errorf("the source's memory holds its fork's proxy credentials")
	}
}
