package session

import (
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coderun-rpc/coderun-rpc/child/rundir"
	"github.com/coderun-rpc/coderun-rpc/child/sandbox"
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// childEgress is how the Manager's children reach the egress proxy: in
// tier process at its loopback address; in tier sandbox, where a run's
// network namespace has nothing else, at 127.0.0.1:sandbox.ProxyPort inside
// it, a listener the daemon makes there for each child (a root daemon,
// through setns) or takes from the child's init (inside: any other daemon).
type childEgress struct {
	proxy *egress.Proxy
	netns bool
	// inside: the children's inits make the listener
	// (sandbox.Config.ProxyListener), taken at the child's first boot-ack.
	inside bool
	log    *slog.Logger
	// trust holds the runs' certificate bundle (the daemon's roots and the
	// proxy's CA, trustBundle), read-only to runs; nil without a CA.
	trust *rundir.Dir
	// bundleMu serialises the bundle's writes; bundleGen is the CA
	// generation the written bundle holds.
	bundleMu  sync.Mutex
	bundleGen uint64
	// stopRefresh ends refreshEvery's loop; refreshed is closed when it
	// has.
	stopRefresh chan struct{}
	refreshed   chan struct{}
}

// bundleRefresh is how often the bundle is checked against the CA's
// generation besides each child's start: a child that lives long (a
// session's) reads the bundle again whenever its program makes a TLS
// context, and must find the current authorities there.
var bundleRefresh = time.Hour

// trustBundle is the bundle's name in childEgress.trust; trustBundleNext is
// where a new bundle is written before it is renamed over it.
const (
	trustBundle     = "ca-bundle.pem"
	trustBundleNext = "ca-bundle.pem.next"
)

// newChildEgress is how children reach proxy; with the proxy's CA it
// writes the runs' trust bundle, in a directory of tempDir (without it,
// logged, runs go on without the bundle: an intercepted tunnel then fails
// their verification, never passes unverified).
func newChildEgress(proxy *egress.Proxy, netns bool, tempDir string, log *slog.Logger) *childEgress {
	e := &childEgress{proxy: proxy, netns: netns, inside: netns && !sandbox.CanEnterNetwork(), log: log}
	ca := proxy.CA()
	if ca == nil {
		return e
	}
	dir, err := rundir.Make(tempDir)
	if err == nil {
		var roots bool
		if e.bundleGen, roots, err = writeBundle(dir, ca); err != nil {
			dropDir(dir, log)
		} else if !roots {
			log.Warn("egress: no system roots found (nor SSL_CERT_FILE); the runs' bundle holds the interception CA only, so HTTPS to hosts without secrets will not verify")
		}
	}
	if err != nil {
		log.Warn("egress: cannot write the runs' certificate bundle; intercepted tunnels will fail verification", "err", err)
		return e
	}
	e.trust = dir
	e.stopRefresh, e.refreshed = make(chan struct{}), make(chan struct{})
	go e.refreshEvery(bundleRefresh)
	return e
}

// refreshEvery calls refreshBundle every period until close.
func (e *childEgress) refreshEvery(period time.Duration) {
	defer close(e.refreshed)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-e.stopRefresh:
			return
		case <-tick.C:
			e.refreshBundle()
		}
	}
}

// writeBundle writes ca's bundle into dir under trustBundle, through dir's
// own descriptor: a new file, renamed over the old one, so a run that opens
// the bundle reads either the old one or the new one whole, never a part.
// It returns the CA generation written and whether the bundle holds roots
// besides the CA's certificates.
func writeBundle(dir *rundir.Dir, ca *egress.CA) (generation uint64, roots bool, err error) {
	bundle, generation, roots := ca.Bundle()
	err = dir.Do(func(fd int) error {
		if err := syscall.Unlinkat(fd, trustBundleNext); err != nil && err != syscall.ENOENT {
			return &os.PathError{Op: "unlinkat", Path: trustBundleNext, Err: err}
		}
		if err := writeAt(fd, trustBundleNext, bundle); err != nil {
			return err
		}
		if err := syscall.Renameat(fd, trustBundleNext, fd, trustBundle); err != nil {
			return &os.PathError{Op: "renameat", Path: trustBundle, Err: err}
		}
		return nil
	})
	return generation, roots, err
}

// refreshBundle writes the bundle again when the CA has rotated since it
// was written (egress.CA: the bundle always holds the authority that signs
// leaves and its successor). It runs before each child gets its
// environment, so every child's first read of the bundle is of one that
// trusts the authorities of the next two CA generations at least.
func (e *childEgress) refreshBundle() {
	ca := e.proxy.CA()
	if e.trust == nil || ca == nil {
		return
	}
	e.bundleMu.Lock()
	defer e.bundleMu.Unlock()
	if ca.Generation() == e.bundleGen {
		return
	}
	gen, _, err := writeBundle(e.trust, ca)
	if err != nil {
		e.log.Warn("egress: cannot write the runs' certificate bundle after the interception CA rotated", "err", err)
		return
	}
	e.bundleGen = gen
}

// trustDir is the bundle's directory ("" without one), for the sandbox's
// read-only grants.
func (e *childEgress) trustDir() string {
	if e == nil || e.trust == nil {
		return ""
	}
	return e.trust.Path()
}

// close stops the bundle's refreshes and removes its directory
// (Manager.Shutdown).
func (e *childEgress) close(log *slog.Logger) {
	if e != nil && e.trust != nil {
		close(e.stopRefresh)
		<-e.refreshed
		dropDir(e.trust, log)
	}
}

// inNamespace is the proxy's address as a sandboxed child sees it.
var inNamespace = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), sandbox.ProxyPort)

// env is a child's proxy environment for token, with the trust bundle
// under every name the run's HTTP clients read (ssl, requests, curl, pip;
// uv reads SSL_CERT_FILE).
func (e *childEgress) env(token string) []string {
	env := egress.Env(token, e.at())
	e.refreshBundle()
	if dir := e.trustDir(); dir != "" {
		f := filepath.Join(dir, trustBundle)
		env = append(env, "SSL_CERT_FILE="+f, "REQUESTS_CA_BUNDLE="+f, "CURL_CA_BUNDLE="+f, "PIP_CERT="+f)
	}
	return env
}

// at is the proxy's address as a child sees it.
func (e *childEgress) at() netip.AddrPort {
	if e.netns {
		return inNamespace
	}
	return e.proxy.Addr()
}

// reach, in tier sandbox, gives w the proxy's listener inside its network
// namespace before w can run a program: made there now (a root daemon), or
// the init's, taken at w's first boot-ack (inside). A failure is logged:
// the child then has no egress (its connections are refused or never
// answered), never more.
func (e *childEgress) reach(w *worker) {
	switch {
	case e == nil || !e.netns:
		return
	case e.inside:
		pid := w.proc.Pid
		w.egressLn = e.listener(func() (*os.File, error) { return sandbox.TakeListener(pid) })
		return
	}
	f, err := sandbox.ListenInNetwork(w.proc.Pid)
	if err != nil {
		e.log.Warn("egress: the proxy cannot listen in the run's network namespace; the run has no egress", "err", err)
		return
	}
	w.egressLn = e.listener(func() (*os.File, error) { return f, nil })
	w.egressLn.serve()
}

// listener is an nsListener, held once, whose socket get gives.
func (e *childEgress) listener(get func() (*os.File, error)) *nsListener {
	l := &nsListener{get: get, proxy: e.proxy, log: e.log}
	l.refs.Add(1)
	return l
}

// nsListener is the proxy's listener in a child's network namespace, held
// by the child and by its session forks (tier sandbox: a fork is a sibling
// in the same namespaces): served from the first serve, closed when the
// last holder releases it.
type nsListener struct {
	refs  atomic.Int64
	proxy *egress.Proxy
	log   *slog.Logger

	mu     sync.Mutex
	get    func() (*os.File, error) // the socket; nil once called
	ln     net.Listener             // nil until served, or when get failed
	closed bool
}

// serve has the proxy serve the listener, once (nil for nil): it gets the
// socket, unless the last holder released it already.
func (l *nsListener) serve() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.get == nil || l.closed {
		return
	}
	f, err := l.get()
	l.get = nil
	if err == nil {
		l.ln, err = net.FileListener(f)
		f.Close()
	}
	if err != nil {
		l.log.Warn("egress: the proxy cannot listen in the run's network namespace; the run has no egress", "err", err)
		return
	}
	l.proxy.Serve(l.ln)
}

// hold is l held once more (nil for nil).
func (l *nsListener) hold() *nsListener {
	if l != nil {
		l.refs.Add(1)
	}
	return l
}

// release drops one hold; the last closes the listener.
func (l *nsListener) release() {
	if l == nil || l.refs.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.ln != nil {
		l.ln.Close()
	}
}

// forkCredentials are a session fork's egress credentials and its source's
// new ones, with their proxy URLs as each child sees the proxy. The zero
// value (no egress) changes nothing.
type forkCredentials struct {
	fork, source       string
	forkURL, sourceURL string
}

// forkCredentials draws them for a fork of src; none when e is nil or src
// has no credentials.
func (e *childEgress) forkCredentials(src *worker) forkCredentials {
	if e == nil || src.egressToken == "" {
		return forkCredentials{}
	}
	c := forkCredentials{fork: egress.NewToken(), source: egress.NewToken()}
	c.forkURL, c.sourceURL = egress.ProxyURL(c.fork, e.at()), egress.ProxyURL(c.source, e.at())
	return c
}

// rotateSource gives src its new credentials once the fork exists or has
// failed (a fork made later from a copy of src would hold them): src's
// proxy frame, written by deadline. src is idle, between runs: its next
// run opens its grant with them.
func (c forkCredentials) rotateSource(src *worker, deadline time.Time) {
	if c.source != "" {
		src.egressToken = c.source
		sendProxy(src.conn, c.sourceURL, deadline)
	}
}

// give makes w, src's adopted fork, the fork's credentials' holder (its
// proxy frame, on its own channel, by deadline), and in tier sandbox a
// holder of src's listener, which their shared namespace reaches. The
// fork's environment is a copy of src's, so it keeps src's secret
// placeholders, bound to the same values.
func (c forkCredentials) give(w, src *worker, deadline time.Time) {
	if c.fork != "" {
		w.egressToken = c.fork
		sendProxy(w.conn, c.forkURL, deadline)
	}
	w.egressLn = src.egressLn.hold()
	w.secrets = src.secrets
}

// runEgressPolicy is a run's egress policy: its own narrowing (validated by
// rpc against the daemon's), else the daemon's; nil without a proxy.
func runEgressPolicy(cfg Config, p protocol.RunParams) *egress.Policy {
	if cfg.Egress == nil {
		return nil
	}
	if own, ok := p.Egress.(*egress.Policy); ok && own != nil {
		return own
	}
	if cfg.EgressPolicy == nil {
		return &egress.Policy{}
	}
	return cfg.EgressPolicy
}

// sessionSecrets are a session's secrets: the daemon policy's with the
// session's own (validated by rpc), none without a proxy.
func sessionSecrets(cfg Config, p protocol.SessionParams) []egress.Secret {
	if cfg.Egress == nil {
		return nil
	}
	if own, ok := p.Egress.(*egress.Policy); ok && own != nil {
		return own.Secrets
	}
	if cfg.EgressPolicy == nil {
		return nil
	}
	return cfg.EgressPolicy.Secrets
}

// runSecrets binds a one-shot run's secrets to w (fresh placeholders, for
// its boot frame), before the run boots it.
func (r *Run) runSecrets(w *worker) {
	if r.egressPolicy != nil {
		w.secrets = egress.Bind(r.egressPolicy.Secrets)
	}
}

// openEgress grants the run's policy, its child's secrets and its budgets
// to w's token before the run's program can send a request; a grant of an
// earlier child (a warm child lost before boot) is revoked first. A child
// without a token gets none: its requests are refused.
func (r *Run) openEgress(w *worker) {
	if r.egressPolicy == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.egress != nil {
		r.egress.Close()
		r.egress = nil
	}
	if w.egressToken == "" {
		return
	}
	lim := r.sm.lim
	r.egress = r.m.cfg.Egress.Open(w.egressToken, r.id, r.egressPolicy, w.secrets,
		egress.Budget{MaxRequests: lim.MaxEgressRequests, MaxBytes: lim.MaxEgressBytes})
}

// closeEgress revokes the run's grant (its open requests and tunnels end)
// and puts its audit in res; res.Egress stays nil without a proxy.
func (r *Run) closeEgress(res *protocol.Result) {
	if r.egressPolicy == nil || res == nil {
		return
	}
	r.mu.Lock()
	g := r.egress
	r.egress = nil
	r.mu.Unlock()
	res.Egress = []protocol.EgressEntry{}
	if g != nil {
		res.Egress = g.Close()
	}
}

// maxNoteEntries bounds the policy entries a bypass note lists.
const maxNoteEntries = 20

// bypassNote is the text a program's failed direct connection or name
// lookup carries in tier sandbox (the child's bootstrap puts it in the
// OSError, docs/containment.md §6): the run's egress policy and the way
// out. "" in tier process, where nothing is blocked. A Python hook only
// words the error: the namespace and Landlock refuse the connection.
func (m *Manager) bypassNote(policy *egress.Policy, w *worker) string {
	switch {
	case m.sandbox == nil:
		return ""
	case policy.Empty():
		return "coderun: this run has no network access (egress policy: none)"
	case w.egressLn == nil:
		return "coderun: this run has no network access (the egress proxy cannot listen in this sandbox)"
	}
	entries := policy.Entries()
	more := ""
	if len(entries) > maxNoteEntries {
		more = " and " + strconv.Itoa(len(entries)-maxNoteEntries) + " more"
		entries = entries[:maxNoteEntries]
	}
	return "coderun: direct connections and name lookups are blocked; HTTP(S) goes through the egress proxy (HTTPS_PROXY) to: " +
		strings.Join(entries, ", ") + more
}
