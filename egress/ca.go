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
	"sync"
	"time"
)

// Validity of the daemon's CA and of the leaves it mints. A leaf is minted
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
// memory at start-up, its key never leaves the daemon's memory. It is
// name-constrained to the hosts of the daemon's allow list, so even its
// certificate cannot vouch for any other host.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for the runs' trust bundle.
	PEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA constrained to allow's hosts.
func NewCA(allow *Policy) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "coderun-rpc egress CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	constrain(tmpl, allow)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, leaves: map[string]*tls.Certificate{},
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
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

// leaf is a certificate for host (a normalised name or an address's text),
// minted on first use and cached until it nears its end.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > leafRenew {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now, end := time.Now(), ca.cert.NotAfter
	if e := time.Now().Add(leafValidity); e.Before(end) {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
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
// SSL_CERT_FILE names, else the system's) followed by the CA, so tunnels
// that are not intercepted verify as before. roots is false when no roots
// were found: the bundle is then the CA alone.
func (ca *CA) Bundle() (bundle []byte, roots bool) {
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		if b, err := readBounded(f); err == nil && len(b) > 0 {
			if b[len(b)-1] != '\n' {
				b = append(b, '\n')
			}
			return append(b, ca.PEM...), true
		}
	}
	return ca.PEM, false
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
