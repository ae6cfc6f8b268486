//go:build linux

package child_test

import (
	"fmt"
	"io"

	"github.com/coderun-rpc/coderun-rpc/child"
)

// Start a shell with an exact argv and environment, read its stdout to end
// of stream, then reap it.
func ExampleStart() {
	p, err := child.Start(child.Spec{Path: "/bin/sh", Args: []string{"-c", `echo "hello $WHO"; exit 3`}, Env: []string{"WHO=child"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Conn.Close()
	defer p.Stderr.Close()
	out, _ := io.ReadAll(p.Stdout)
	p.Stdout.Close()
	e, err := p.Wait()
	fmt.Printf("%s%d %v\n", out, e.Code, err)
	// Output:
	// hello child
	// 3 <nil>
}
