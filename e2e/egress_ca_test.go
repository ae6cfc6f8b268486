package e2e

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"slices"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// bundleProgram returns the run's trust bundle's path and SHA-256, and the
// errno names of its attempts to plant a file or a symlink at the name the
// daemon stages a new bundle under, and to replace the bundle (when ATTACK:
// tier process offers no such protection).
const bundleProgram = `import errno, hashlib, os
f = os.environ["SSL_CERT_FILE"]
d = os.path.dirname(f)
tries = []
for op in () if not ATTACK else (lambda: open(os.path.join(d, "ca-bundle.pem.next"), "w").close(),
           lambda: os.symlink("/etc/passwd", os.path.join(d, "ca-bundle.pem.next")),
           lambda: os.rename(f, os.path.join(d, "moved"))):
    try:
        op()
        tries.append("done")
    except OSError as e:
        tries.append(errno.errorcode.get(e.errno, str(e.errno)))
return [f, hashlib.sha256(open(f, "rb").read()).hexdigest(), tries]
`

// TestC1290EgressTrustBundleAuthorities: a real daemon's runs trust a
// bundle that ends with the CA's two authorities (the active one and its
// successor: distinct keys, both CAs with path length 0, both
// name-constrained to the allow list) and holds no key; the run reads the
// same file the daemon wrote. In tier sandbox the run can neither plant
// anything at the staging name nor move the bundle.
func TestC1290EgressTrustBundleAuthorities(t *testing.T) {
	leakcheck.Check(t)
	u := newEgressUpstreams(t, func(string, string) string {
		return `{"allow": ["api.example.com", "*.example.org"]}`
	})
	d := started(t, u.env)
	attack := "ATTACK = False\n"
	if suiteTier == "sandbox" {
		attack = "ATTACK = True\n"
	}
	prog, _ := json.Marshal(attack + bundleProgram)
	r, raw := d.egressRun(t, `{"program":`+string(prog)+`}`)
	var got []json.RawMessage
	if err := json.Unmarshal(r.Value, &got); err != nil || len(got) != 3 {
		t.Fatalf("run: %s", raw)
	}
	var path, sum string
	var tries []string
	if json.Unmarshal(got[0], &path) != nil || json.Unmarshal(got[1], &sum) != nil || json.Unmarshal(got[2], &tries) != nil {
		t.Fatalf("run: %s", raw)
	}
	if slices.Contains(tries, "done") || suiteTier == "sandbox" && len(tries) != 3 {
		t.Errorf("a sandboxed run changed the bundle's directory: %v", tries)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		t.Fatal("the run read another bundle than the daemon's")
	}
	var certs []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			t.Fatalf("the bundle holds a %s block", blk.Type)
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
	if len(certs) < 2 {
		t.Fatalf("the bundle holds %d certificates", len(certs))
	}
	pair := certs[len(certs)-2:]
	for i, c := range pair {
		if !c.IsCA || !c.MaxPathLenZero || !slices.Equal(c.PermittedDNSDomains, []string{"api.example.com", ".example.org"}) {
			t.Errorf("authority %d: CA %v, path length 0 %v, names %v", i, c.IsCA, c.MaxPathLenZero, c.PermittedDNSDomains)
		}
	}
	if pair[0].Equal(pair[1]) || string(pair[0].SubjectKeyId) == string(pair[1].SubjectKeyId) {
		t.Error("the bundle's two authorities are one")
	}
}
