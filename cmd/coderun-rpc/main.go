// Command coderun-rpc serves Python runs over JSON-RPC 2.0 on stdio.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "coderun-rpc: not yet serving")
	os.Exit(1)
}
