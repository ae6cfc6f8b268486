package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"
)

// Validity of the daemon's CAs and of the leaves they mint. A leaf is minted
// again once less than leafRenew of it is left.
const (
	caValidity   = 30 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	leafRenew    = time.Hour
	// maxLeaves bounds the cache of minted leaves (one per bound host a
	// run reached); past it the cache starts over.
	maxLeaves = 1024
)

// CA is the daemon's certificate authority for intercepted tunnels: made in
// memory, its keys never leave the daemon's memory. Each of its
// certificates is name-constrained to the hosts of the daemon's allow list,
// so none can vouch for any other host.
//
// It rotates: it holds the active authority, which signs every leaf, and
// its successor, already published in the runs' trust bundle. Every third
// of a CA life the successor becomes active and a new successor is made. A run
// that read the bundle before a rotation therefore already trusts the
// authority that signs leaves after it; leaves are never signed by a
// retired authority (the cache is dropped at each rotation).
type CA struct {
	allow    *Policy
	validity time.Duration
	now      func() time.Time

	mu         sync.Mutex
	active     *authority
	successor  *authority
	generation uint64
	leaves     map[string]*tls.Certificate
}

// authority is one self-signed CA certificate and its key.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a CA constrained to allow's hosts, its authorities valid 30
// days each.
func NewCA(allow *Policy) (*CA, error) {
	return NewCAAt(allow, caValidity, time.Now)
}

// NewCAAt is NewCA with each authority valid validity (at least three leaf
// lives, so that a retired authority outlives the leaves it signed) on the
// clock now: tests drive the rotation with it, here and where the bundle is
// published.
func NewCAAt(allow *Policy, validity time.Duration, now func() time.Time) (*CA, error) {
	if validity < 3*leafValidity {
		return nil, errors.New("a CA must be valid at least three leaf lives")
	}
	ca := &CA{allow: allow, validity: validity, now: now, leaves: map[string]*tls.Certificate{}}
	var err error
	if ca.active, err = ca.newAuthority(); err != nil {
		return nil, err
	}
	if ca.successor, err = ca.newAuthority(); err != nil {
		return nil, err
	}
	return ca, nil
}

// newAuthority makes a CA certificate and key valid from now (less an
// hour, for clocks behind ours) for ca.validity.
func (ca *CA) newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := ca.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "coderun-rpc egress CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(ca.validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	constrain(tmpl, ca.allow)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// rotateIfDue makes the successor active once it has been published for a
// third of a CA life, or once the active one has less than a third of its
// life left (ca.mu held). Authorities are made a third of a life apart, so
// an active authority is retired with a third of its life left (the first
// one, made with its successor: two thirds): more than a leaf's life, and
// every leaf it signed is capped at its end anyway. After a gap in the CA's
// use (a suspended machine) it rotates twice at most, until the active one
// is fresh enough. A failure to make the new successor keeps the current
// pair (retried on the next call).
func (ca *CA) rotateIfDue() {
	for ca.rotationDue() {
		next, err := ca.newAuthority()
		if err != nil {
			return
		}
		ca.active, ca.successor = ca.successor, next
		ca.generation++
		clear(ca.leaves)
	}
}

// rotationDue reports whether the pair must move on (ca.mu held).
func (ca *CA) rotationDue() bool {
	now := ca.now()
	published := now.Sub(ca.successor.cert.NotBefore.Add(time.Hour))
	return published >= ca.validity/3 || ca.active.cert.NotAfter.Sub(now) < ca.validity/3
}

// PEM is the certificates runs trust: the active authority's and its
// successor's.
func (ca *CA) PEM() []byte {
	certs, _ := ca.trusted()
	return certs
}

// trusted is PEM with the generation it belongs to, which changes at each
// rotation (when the runs' bundle must be written again).
func (ca *CA) trusted() (certs []byte, generation uint64) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.rotateIfDue()
	return append(slices.Clip(ca.active.pem), ca.successor.pem...), ca.generation
}

// Generation counts the CA's rotations, made here when one is due.
func (ca *CA) Generation() uint64 {
	_, generation := ca.trusted()
	return generation
}

// constrain limits tmpl to the names and addresses of allow's rules (a
// wildcard rule: its subdomains only). A kind the allow list does not name
// (addresses, say) is left unconstrained: an empty or catch-all exclusion
// is read differently by different verifiers.
func constrain(tmpl *x509.Certificate, allow *Policy) {
	tmpl.PermittedDNSDomainsCritical = true
	for _, r := range allow.rules() {
		switch {
		case r.Addr.IsValid():
			bits := r.Addr.BitLen()
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges,
				&net.IPNet{IP: r.Addr.AsSlice(), Mask: net.CIDRMask(bits, bits)})
		case r.Wildcard:
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, "."+r.Host)
		default:
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, r.Host)
		}
	}
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // never fails (crypto/rand)
	return n
}

// leaf is a certificate for host (a normalised name or an address's text)
// signed by the active authority, minted on first use and cached until it
// nears its end or the CA rotates.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	ca.rotateIfDue()
	now := ca.now()
	if c, ok := ca.leaves[host]; ok && c.Leaf.NotAfter.Sub(now) > leafRenew {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	end := ca.active.cert.NotAfter
	if e := now.Add(leafValidity); e.Before(end) {
		end = e
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// No common name: OpenSSL checks a CN that looks like a host name
		// (digits and dots do) against the CA's DNS constraints.
		tmpl.Subject = pkix.Name{}
		tmpl.IPAddresses = []net.IP{a.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.active.cert, &key.PublicKey, ca.active.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

// systemBundles are where the system's roots are found, as Go's
// crypto/x509 looks for them on Linux.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// maxBundleBytes bounds the system roots read into the bundle.
const maxBundleBytes = 8 << 20

// Bundle is the runs' trust bundle: the roots the daemon trusts (the file
// SSL_CERT_FILE names, else the system's) followed by the CA's PEM, so
// tunnels that are not intercepted verify as before, with the generation of
// the CA's certificates in it. roots is false when no roots were found: the
// bundle is then the CA's certificates alone.
func (ca *CA) Bundle() (bundle []byte, generation uint64, roots bool) {
	certs, generation := ca.trusted()
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		if b, err := readBounded(f); err == nil && len(b) > 0 {
			if b[len(b)-1] != '\n' {
				b = append(b, '\n')
			}
			return append(b, certs...), generation, true
		}
	}
	return certs, generation, false
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err == nil && len(b) > maxBundleBytes {
		return nil, errors.New("too large")
	}
	return b, err
}
