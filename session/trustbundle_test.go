package session

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// C1288: when the interception CA rotates, the next child's environment
// comes after the bundle was written again: a new file renamed over the
// same name (a run that opened the old one keeps reading it whole), holding
// the CA's current certificates and nothing else in the directory; a
// symlink a program planted at the staging name is replaced, never
// followed.
func TestC1288TrustBundleFollowsRotation(t *testing.T) {
	leakcheck.Check(t)
	pol, entry, rule := egress.Parse([]byte(`{"allow": ["api.example.com"]}`))
	if rule != "" {
		t.Fatalf("%s: %s", entry, rule)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const life = 90 * 24 * time.Hour
	ca, err := egress.NewCAAt(pol, life, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.Listen(egress.Options{CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := newChildEgress(p, false, t.TempDir(), slog.New(slog.DiscardHandler))
	defer e.close(nil)
	bundle := filepath.Join(e.trustDir(), trustBundle)
	if !slices.Contains(e.env("t1"), "SSL_CERT_FILE="+bundle) {
		t.Fatalf("the child's environment does not name the bundle: %q", e.env("t1"))
	}
	opened, err := os.Open(bundle)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	before, _ := os.ReadFile(bundle)
	if !bytes.HasSuffix(before, ca.PEM()) {
		t.Fatal("the bundle does not end with the CA's certificates")
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(e.trustDir(), trustBundleNext)); err != nil {
		t.Fatal(err)
	}

	now = now.Add(life/3 + 2*time.Hour)
	e.env("t2")
	after, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	certs := ca.PEM()
	if bytes.Equal(after, before) || !bytes.HasSuffix(after, certs) {
		t.Fatal("the bundle was not written again with the rotated CA's certificates")
	}
	// The new active authority (the first certificate of certs) was the
	// successor in the bundle read before the rotation.
	active := certs[:bytes.Index(certs, []byte("-----END CERTIFICATE-----"))]
	if !bytes.Contains(before, active) {
		t.Fatal("the authority signing leaves after the rotation was not in the bundle before it")
	}
	if old, _ := io.ReadAll(opened); !bytes.Equal(old, before) {
		t.Fatal("a run that opened the bundle before the rotation read a changed file")
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Fatalf("the write followed a planted symlink: the victim holds %q", b)
	}
	names, _ := os.ReadDir(e.trustDir())
	if len(names) != 1 || names[0].Name() != trustBundle {
		t.Fatalf("the bundle directory holds %v", names)
	}
}

// C1289: a daemon that starts no child still writes the bundle again after
// a rotation (a session's child reads it whenever its program makes a TLS
// context), and stops doing so at close.
func TestC1289TrustBundleRefreshedWithoutChildren(t *testing.T) {
	leakcheck.Check(t)
	pol, _, _ := egress.Parse([]byte(`{"allow": ["api.example.com"]}`))
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	const life = 90 * 24 * time.Hour
	ca, err := egress.NewCAAt(pol, life, clock)
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.Listen(egress.Options{CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer func(d time.Duration) { bundleRefresh = d }(bundleRefresh)
	bundleRefresh = time.Millisecond
	e := newChildEgress(p, false, t.TempDir(), slog.New(slog.DiscardHandler))
	defer e.close(nil)
	bundle := filepath.Join(e.trustDir(), trustBundle)
	before, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(life/3 + 2*time.Hour)
	mu.Unlock()
	for deadline := time.Now().Add(time.Minute); ; {
		after, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(after, before) {
			if !bytes.HasSuffix(after, ca.PEM()) {
				t.Fatal("the bundle written again does not hold the rotated CA's certificates")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the bundle was not written again within a minute of the rotation")
		}
		time.Sleep(5 * time.Millisecond) // polling for the event, not ordering it
	}
}
