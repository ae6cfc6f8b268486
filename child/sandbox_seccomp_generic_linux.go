//go:build linux && !(amd64 || ppc64le)

package child

// legacyMetadataSyscalls: none; this architecture has only the *at forms
// (see metadataSyscalls).
var legacyMetadataSyscalls []uint32
