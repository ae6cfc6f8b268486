//go:build !sandboxinit

package leaninit

var image []byte
