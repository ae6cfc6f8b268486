package session

import (
	"context"
	"errors"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
)

// Packages on demand (docs/packages.md): a run's requests are installed by
// the Manager's cache before the run gets a child, and the installed set's
// directory goes to the child's sys.path in the boot frame.

// requirements parses validated requests (rpc checked them: a request that
// no longer parses is dropped, which cannot happen).
func requirements(texts []string) []wheelset.Requirement {
	var out []wheelset.Requirement
	for _, t := range texts {
		if r, err := wheelset.ParseRequirement(t); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// packageTrees are the trees tier sandbox grants for cache's sets.
func packageTrees(cache *wheelset.Cache) []string {
	if cache == nil {
		return nil
	}
	return []string{cache.SetsDir()}
}

// installPackages leases the set of r's packages, installing it if need
// be, and records the time it took (stats.installMs). A failure to resolve
// or install is the run's exception, in the installer's one line; nothing
// of the program runs. A run decided meanwhile stops waiting (nil: startOn
// settles it).
func (r *Run) installPackages() *protocol.RunError {
	if len(r.packages) == 0 {
		return nil
	}
	cache := r.m.cfg.Packages
	if cache == nil {
		return workerExit("packages were asked for but this daemon installs none")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.mu.Lock()
	if r.sm.decided() {
		r.mu.Unlock()
		return nil
	}
	r.stopInstall = cancel
	r.mu.Unlock()
	began := time.Now()
	lease, err := cache.Acquire(ctx, r.packages)
	took := time.Since(began).Milliseconds()
	r.mu.Lock()
	r.stopInstall, r.lease, r.sm.installMs = nil, lease, &took
	r.mu.Unlock()
	var ie *wheelset.InstallError
	switch {
	case err == nil:
		r.log.Debug("packages ready", "dir", lease.Dir, "installed", lease.Installed, "ms", took)
		return nil
	case ctx.Err() != nil:
		return nil
	case errors.As(err, &ie):
		return &protocol.RunError{Kind: protocol.KindException, Message: ie.Msg}
	}
	r.log.Error("package cache failed", "err", err)
	return workerExit("installing packages failed: " + err.Error())
}

// leaseSysPath is the set's directory for the boot frame (nil without a lease).
func leaseSysPath(l *wheelset.Lease) []string {
	if l == nil {
		return nil
	}
	return []string{l.Dir}
}

// sessionPackages leases the set of a session's packages (nil, nil for
// none), installing it if need be, until Shutdown. A failure to resolve or
// install is the *wheelset.InstallError, refusing the open.
func (m *Manager) sessionPackages(texts []string) (*wheelset.Lease, error) {
	reqs := requirements(texts)
	if len(reqs) == 0 {
		return nil, nil
	}
	if m.cfg.Packages == nil {
		return nil, errors.New("packages were asked for but this daemon installs none")
	}
	return m.cfg.Packages.Acquire(m.stopping, reqs)
}
