// Package leaninit holds the image of the sandbox's lean helper binary
// (cmd/coderun-sandbox-init) inside the daemon, so a release stays one file.
//
// `make build` and packaging/dist.py build the helper first, place it in this
// directory as coderun-sandbox-init (ignored by git) and build the daemon
// with the build tag sandboxinit, which embeds it. Without the tag (go test
// binaries, go run, a plain go build) Image is empty and child/sandbox
// re-executes the binary it is in instead.
//
// The helper itself is built without the tag: it never carries an image.
package leaninit

// Image returns the helper's executable image, or nil when this binary was
// built without one.
func Image() []byte { return image }
