package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// verifies reports whether leaf verifies for host against the
// certificates of bundle at the time at.
func verifies(t *testing.T, bundle []byte, leaf *x509.Certificate, host string, at time.Time) bool {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle holds no certificate")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: at})
	return err == nil
}

// certificatesOnly fails t unless every PEM block of b is a certificate
// (no key ever leaves the CA).
func certificatesOnly(t *testing.T, b []byte) {
	t.Helper()
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			if len(bytes.TrimSpace(rest)) != 0 {
				t.Fatalf("the bundle has a part that is not PEM: %q", rest)
			}
			return
		}
		if blk.Type != "CERTIFICATE" {
			t.Fatalf("the bundle holds a %s block", blk.Type)
		}
	}
}

// C1285: the CA rotates once its successor has been published for a third
// of a CA life; leaves after the rotation verify against the bundle runs
// read before it and after it, leaves before it against the old bundle.
func TestC1285CARotation(t *testing.T) {
	leakcheck.Check(t)
	pol, entry, rule := Parse([]byte(`{"allow": ["api.example.com", "*.example.org"]}`))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ca, err := NewCAAt(pol, caValidity, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	const host = "api.example.com"
	before, gen0 := ca.trusted()
	certificatesOnly(t, before)
	old, err := ca.leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	if !verifies(t, before, old.Leaf, host, clock.t) {
		t.Fatal("a leaf does not verify against the bundle")
	}

	// Just before the renewal point nothing changes.
	clock.t = clock.t.Add(caValidity/3 - 2*time.Hour)
	if g := ca.Generation(); g != gen0 {
		t.Fatalf("the CA rotated before its successor was published a third of a life: generation %d", g)
	}
	// Past it: a new generation, a new signer, the cache dropped.
	clock.t = clock.t.Add(3 * time.Hour)
	fresh, err := ca.leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	after, gen1 := ca.trusted()
	certificatesOnly(t, after)
	if gen1 == gen0 {
		t.Fatal("the CA did not rotate a third of a life after its successor was published")
	}
	if bytes.Equal(fresh.Leaf.RawIssuer, old.Leaf.RawIssuer) && bytes.Equal(fresh.Leaf.AuthorityKeyId, old.Leaf.AuthorityKeyId) {
		t.Fatal("the leaf after the rotation is signed by the retired authority")
	}
	if !verifies(t, before, fresh.Leaf, host, clock.t) {
		t.Fatal("a leaf minted after the rotation does not verify against the bundle a run read before it")
	}
	if !verifies(t, after, fresh.Leaf, host, clock.t) {
		t.Fatal("a leaf minted after the rotation does not verify against the new bundle")
	}
	if !verifies(t, before, old.Leaf, host, old.Leaf.NotAfter.Add(-time.Minute)) {
		t.Fatal("a leaf minted before the rotation no longer verifies against the old bundle")
	}
	if fresh.Leaf.NotAfter.Sub(clock.t) < leafValidity-time.Minute {
		t.Fatalf("the leaf after the rotation ends too soon: %v", fresh.Leaf.NotAfter)
	}
	// The new authority keeps the name constraints.
	if got := ca.active.cert.PermittedDNSDomains; !slices.Equal(got, []string{"api.example.com", ".example.org"}) {
		t.Fatalf("the new authority's name constraints: %v", got)
	}
	if verifies(t, after, mintFor(t, ca, "evil.example.net"), "evil.example.net", clock.t) {
		t.Fatal("the new authority vouches for a host outside the allow list")
	}
}

// mintFor is a leaf for host from ca's active authority, bypassing the
// proxy's own check that host is bound (as an attacker's leaf would be).
func mintFor(t *testing.T, ca *CA, host string) *x509.Certificate {
	t.Helper()
	c, err := ca.leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

// C1286: over many CA lives every leaf verifies against the bundle of the
// previous generation (what a run that started before the last rotation
// read) and ends no later than its authority.
func TestC1286CARotationChain(t *testing.T) {
	leakcheck.Check(t)
	pol, _, _ := Parse([]byte(`{"allow": ["api.example.com"]}`))
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ca, err := NewCAAt(pol, 3*leafValidity, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	prev, gen := ca.trusted()
	for step := 0; step < 40; step++ {
		clock.t = clock.t.Add(leafValidity / 4)
		c, err := ca.leaf("api.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if c.Leaf.NotAfter.After(ca.active.cert.NotAfter) {
			t.Fatalf("step %d: the leaf outlives its authority", step)
		}
		if c.Leaf.NotAfter.Sub(clock.t) <= leafRenew {
			t.Fatalf("step %d: the leaf served is about to expire (%v)", step, c.Leaf.NotAfter)
		}
		if !verifies(t, prev, c.Leaf, "api.example.com", clock.t) {
			t.Fatalf("step %d: a leaf does not verify against the previous generation's bundle", step)
		}
		cur, g := ca.trusted()
		if g != gen {
			prev, gen = cur, g
		}
	}
	if gen < 3 {
		t.Fatalf("the CA rotated %d times over 10 leaf lives of a CA valid 3", gen)
	}
}

// C1287: a CA life shorter than three leaf lives is refused.
func TestC1287CAValidityFloor(t *testing.T) {
	leakcheck.Check(t)
	if _, err := NewCAAt(&Policy{}, 2*leafValidity, time.Now); err == nil {
		t.Fatal("a CA valid less than three leaf lives was made")
	}
}

// C1291: after a gap in the CA's use longer than its life (a suspended
// machine, a daemon idle for months), the next leaf is signed by an
// authority with at least a third of its life left and verifies against
// the certificates published then, for a full leaf life.
func TestC1291CARotationAfterLongGap(t *testing.T) {
	leakcheck.Check(t)
	pol, _, _ := Parse([]byte(`{"allow": ["api.example.com"]}`))
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ca, err := NewCAAt(pol, caValidity, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range []time.Duration{caValidity * 5 / 6, 2 * caValidity, 400 * 24 * time.Hour} {
		clock.t = clock.t.Add(gap)
		c, err := ca.leaf("api.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if left := ca.active.cert.NotAfter.Sub(clock.t); left < caValidity/3 {
			t.Errorf("after a gap of %v the active authority has %v left", gap, left)
		}
		if !verifies(t, ca.PEM(), c.Leaf, "api.example.com", clock.t.Add(leafValidity-2*time.Hour)) {
			t.Errorf("after a gap of %v the leaf does not verify for a leaf life", gap)
		}
	}
}
