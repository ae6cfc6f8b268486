// Package py embeds the Python side of coderun-rpc: the child bootstrap and its
// fd-3 protocol module (docs/child-protocol-child.md §3). The session package stages both
// files into every run directory; py/mirror_test.go keeps protocol.py in step
// with the Go protocol package.
package py

import _ "embed"

// Bootstrap is py/bootstrap.py, run in each child as
// `<python> -u -I <rundir>/bootstrap.py` with the protocol socket on fd 3.
//
//go:embed bootstrap.py
var Bootstrap []byte

// Protocol is py/protocol.py, the child's constants, frame shapes and lossless
// JSON codec; staged next to bootstrap.py, which loads it from there.
//
//go:embed protocol.py
var Protocol []byte

// ForkServer is py/forkserver.py, the pristine interpreter that forks one
// child per run (docs/containment-start-modes.md §4): staged with bootstrap.py and protocol.py in its own
// directory and run as `<python> -u -I <dir>/forkserver.py` with a
// SOCK_SEQPACKET control socket on fd 3 (package child, ForkServer).
//
//go:embed forkserver.py
var ForkServer []byte

// SandboxFork is py/sandboxfork.py, staged next to forkserver.py for a
// server started with --sandbox: how each forked child enters the sandbox's
// namespaces and hands over to the sandbox init (docs/containment-start-modes.md §4.1).
//
//go:embed sandboxfork.py
var SandboxFork []byte
