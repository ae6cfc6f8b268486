package session

import (
	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
)

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

// openEgress grants the run's policy and budgets to w's token before the
// run's program can send a request; a grant of an earlier child (a warm
// child lost before boot) is revoked first. A child without a token (a
// session's fork) gets none: its requests are refused.
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
	r.egress = r.m.cfg.Egress.Open(w.egressToken, r.id, r.egressPolicy,
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
