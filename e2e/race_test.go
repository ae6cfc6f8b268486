//go:build race

package e2e

// raceEnabled: under `go test -race` the daemon is built with -race too, so
// every e2e conversation doubles as a race test of rpc and session.
const raceEnabled = true
