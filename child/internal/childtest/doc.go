//go:build linux

// Package childtest holds what the tests of child and its sub-packages share:
// helper children run by re-executing the test binary (os/exec's
// TestHelperProcess pattern, see Main and HelperVar), and helpers that start,
// wait for, read from and reap them with timeouts. Tests only.
package childtest
