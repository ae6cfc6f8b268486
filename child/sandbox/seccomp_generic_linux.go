//go:build linux && !(amd64 || ppc64le)

package sandbox

// legacySyscalls: none; this architecture has only the forms listed in
// epermSyscalls.
var legacySyscalls []uint32
