package rpc

// state is the server's lifecycle (gopls serverState), guarded by Server.mu.
type state int

const (
	stateCreated      state = iota // before initialize
	stateInitialized               // serving
	stateShuttingDown              // shutdown received: requests refused
)

func (s state) String() string {
	switch s {
	case stateCreated:
		return "created"
	case stateInitialized:
		return "initialized"
	case stateShuttingDown:
		return "shutting down"
	}
	return "unknown"
}
