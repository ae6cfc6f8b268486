//go:build linux

// Package forkserver is the daemon's side of a fork server: a long-lived
// child (started like child.Start, with a SOCK_SEQPACKET control socket on
// fd 3) that forks one child per Spawn request, so that a child costs a fork
// instead of an interpreter start-up (docs/containment-start-modes.md §4). Spawn returns a
// child.Process whose Wait reports the status the server relays. The
// control protocol and its validation are in forkserver_linux.go.
package forkserver
