package wire

import (
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/egress"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// ValidateSessionOpen checks session/open params (the rows of
// sessionOpenParams); absent params are no params. daemon is the daemon's
// egress policy (nil: none), which the session's secrets must lie within.
func ValidateSessionOpen(raw []byte, cfg protocol.Limits, idleMax int64, allow wheelset.AllowList, daemon *egress.Policy) (protocol.SessionParams, error) {
	if raw == nil {
		return protocol.SessionParams{}, nil
	}
	return validateParams(raw, sessionOpenParams, validation{limits: cfg, idleMax: idleMax, packages: allow, egress: daemon})
}

// idleTimeout reads "idleTimeoutMs": absent or null (0), else a positive
// integer no larger than the configured idleMax.
func idleTimeout(m *wireguard.Member, idleMax int64) (int64, error) {
	if !given(m) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(m.Value), 10, 64)
	switch {
	case wireguard.KindOf(m.Value) != wireguard.KindNumber || err != nil || n <= 0:
		return 0, reject("idleTimeoutMs must be a positive integer, got " + string(m.Value))
	case n > idleMax:
		return 0, reject("idleTimeoutMs must not exceed the daemon's configured " +
			strconv.FormatInt(idleMax, 10) + ", got " + string(m.Value))
	}
	return n, nil
}

// ValidateSessionRef checks {sessionId} params (session/fork, session/close).
func ValidateSessionRef(raw []byte) (string, error) {
	return validateParams(raw, sessionRefParams, validation{})
}

// sessionID reads "sessionId": a string; required or optional (run).
func sessionID(m *wireguard.Member, required bool) (string, error) {
	if m == nil || !required && !given(m) {
		if required {
			return "", reject("sessionId must be a string")
		}
		return "", nil
	}
	id, ok := wireguard.DecodeString(m.Value)
	switch {
	case !ok:
		return "", reject("sessionId must be a string")
	case id == "":
		return "", reject("sessionId must be a non-empty string")
	}
	return id, nil
}
