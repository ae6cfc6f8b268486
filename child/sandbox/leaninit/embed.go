//go:build sandboxinit

package leaninit

import _ "embed" // the helper's image

//go:embed coderun-sandbox-init
var image []byte
