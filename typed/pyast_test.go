package typed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

// astScript answers each length-prefixed UTF-8 text on stdin with "ok" or
// "error <why>": parsed by ast.parse with 3.10 grammar (the oldest Python the
// stubs must suit), then compiled (which also catches what only the
// compiler sees, such as a duplicate parameter). It runs for the whole test process, so fuzzing pays the
// interpreter start once.
const astScript = `import ast, sys
inp = sys.stdin.buffer
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    src = inp.read(int.from_bytes(head, "big"))
    try:
        compile(ast.parse(src.decode("utf-8"), "<stub>", feature_version=(3, 10)), "<stub>", "exec")
        answer = "ok"
    except BaseException as e:
        answer = "error " + repr(e).replace("\n", " ")
    sys.stdout.write(answer + "\n")
    sys.stdout.flush()
`

// astChecker is one running astScript.
type astChecker struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startASTChecker() (*astChecker, error) {
	cmd := exec.Command("python3", "-c", astScript)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &astChecker{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// parse is nil when src parses as Python.
func (c *astChecker) parse(src string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(src)))
	if _, err := c.in.Write(append(msg, src...)); err != nil {
		return fmt.Errorf("ast helper: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("ast helper: %w", err)
	}
	if line = strings.TrimSuffix(line, "\n"); line != "ok" {
		return errors.New(line)
	}
	return nil
}

// close ends the helper (EOF on its stdin) and reaps it.
func (c *astChecker) close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// sharedAST is the process-wide helper the fuzz targets use; TestMain ends it.
var sharedAST struct {
	once sync.Once
	c    *astChecker
	err  error
}

func processAST(t testing.TB) *astChecker {
	sharedAST.once.Do(func() { sharedAST.c, sharedAST.err = startASTChecker() })
	if sharedAST.err != nil {
		t.Fatalf("start python3: %v", sharedAST.err)
	}
	return sharedAST.c
}

// testASTChecker starts a helper for one test, checked for leaks and closed
// at its end.
func testASTChecker(t *testing.T) *astChecker {
	leakcheck.Check(t)
	c, err := startASTChecker()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedAST.c != nil {
		sharedAST.c.close()
	}
	os.Exit(code)
}

func TestASTCheckerTellsValidFromInvalid(t *testing.T) {
	c := testASTChecker(t)
	if err := c.parse("x: int = 1\n"); err != nil {
		t.Fatalf("valid text refused: %v", err)
	}
	for _, bad := range []string{"def (:\n", "a\x00b", "try:\n    pass\nexcept* E:\n    pass\n", "def f(a, **a): pass\n"} {
		if err := c.parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
