package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

type initializeResult struct {
	ServerInfo   serverInfo   `json:"serverInfo"`
	Capabilities capabilities `json:"capabilities"`
}

type serverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type capabilities struct {
	Languages []string `json:"languages"`
	Isolation string   `json:"isolation"`
	// IsolationReason says why that tier is in force (docs/protocol.md §2).
	IsolationReason string       `json:"isolationReason"`
	LogStreaming    bool         `json:"logStreaming"`
	Limits          limitsInfo   `json:"limits"`
	Python          pythonInfo   `json:"python"`
	Sessions        sessionsInfo `json:"sessions"`
	// Egress is present when the daemon has an egress policy.
	Egress *egressInfo `json:"egress,omitempty"`
}

// egressInfo is capabilities.egress (docs/containment.md §6): what a run
// may reach through the proxy, and whether the tier enforces that the
// proxy is its only way out.
type egressInfo struct {
	Allow []string `json:"allow"`
	// Secrets name each secret's kind, name and hosts, never its value.
	Secrets  []string `json:"secrets,omitempty"`
	Enforced bool     `json:"enforced"`
	Note     string   `json:"note"`
}

type sessionsInfo struct {
	Max           int   `json:"max"`
	IdleTimeoutMs int64 `json:"idleTimeoutMs"`
	Fork          bool  `json:"fork"`
}

type limitsInfo struct {
	CPUSeconds        int64 `json:"cpuSeconds"`
	MaxWallMs         int64 `json:"maxWallMs"`
	AddressSpaceMb    int64 `json:"addressSpaceMb"`
	MaxLogBytes       int64 `json:"maxLogBytes"`
	MaxValueBytes     int64 `json:"maxValueBytes"`
	GraceMs           int64 `json:"graceMs"`
	MaxConcurrentRuns int   `json:"maxConcurrentRuns"`
}

type pythonInfo struct {
	Executable string `json:"executable"`
	Version    string `json:"version"`
	// Preload are the modules the fork server imports before it serves
	// (CODERUN_PRELOAD, docs/containment-start-modes.md §4.4); never null.
	Preload []string `json:"preload"`
}

// initialize answers the first initialize (docs/protocol.md §2, C5); params must be
// absent, null or an object.
func (s *Server) initialize(id reqID, st state, params []byte) {
	if st != stateCreated {
		s.w.replyError(&id, protocol.CodeInvalidRequest, "server is already initialized")
		return
	}
	if k := wireguard.KindOf(params); params != nil && k != wireguard.KindNull && k != wireguard.KindObject {
		s.w.replyError(&id, protocol.CodeInvalidParams, "params must be an object")
		return
	}
	s.mu.Lock()
	s.state = stateInitialized
	s.mu.Unlock()
	s.w.reply(id, s.initializeResult())
}

// sessionsInfo is capabilities.sessions: max 0 when sessions are off.
func (s *Server) sessionsInfo() sessionsInfo {
	c := s.opts.Daemon
	if !s.sessionsOn() {
		return sessionsInfo{IdleTimeoutMs: c.SessionIdleMs}
	}
	return sessionsInfo{Max: c.MaxSessions, IdleTimeoutMs: c.SessionIdleMs, Fork: c.SessionFork}
}

func (s *Server) initializeResult() initializeResult {
	c := s.opts.Daemon
	return initializeResult{
		ServerInfo: serverInfo{Name: "coderun-rpc", Version: s.opts.Version},
		Capabilities: capabilities{
			Languages:       []string{"python"},
			Isolation:       c.Isolation,
			IsolationReason: c.IsolationReason,
			LogStreaming:    true,
			Limits: limitsInfo{
				CPUSeconds: c.Limits.CPUSeconds, MaxWallMs: c.Limits.MaxWallMs,
				AddressSpaceMb: c.Limits.AddressSpaceMb, MaxLogBytes: c.Limits.MaxLogBytes,
				MaxValueBytes: c.Limits.MaxValueBytes, GraceMs: c.GraceMs,
				MaxConcurrentRuns: c.MaxConcurrentRuns,
			},
			Python:   pythonInfo{Executable: c.Python, Version: c.PythonVersion, Preload: append([]string{}, c.Preload...)},
			Sessions: s.sessionsInfo(),
			Egress:   egressCapability(c),
		},
	}
}

// egressCapability is capabilities.egress, nil without a policy. Only tier
// sandbox can confine a program to the proxy.
func egressCapability(c Daemon) *egressInfo {
	if c.Egress == nil {
		return nil
	}
	info := &egressInfo{Allow: c.Egress.Entries(), Secrets: c.Egress.SecretsText(), Enforced: c.Isolation == "sandbox"}
	info.Note = EgressNote(c.Isolation)
	return info
}

// EgressNote says how a tier holds a program to the egress policy
// (initialize, --check).
func EgressNote(isolation string) string {
	if isolation == "sandbox" {
		return "HTTP(S) through the daemon's proxy (HTTP_PROXY, HTTPS_PROXY) to the allowed hosts only; the run's network namespace reaches nothing else (a daemon that is not root cannot place the proxy there: its runs have no egress)"
	}
	return "tier process: HTTP(S) clients are pointed at the daemon's proxy (HTTP_PROXY, HTTPS_PROXY), but a program can bypass it: the policy is not enforced"
}
