package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestChildImportsNothingAbove: the packages under child/, their tests
// included, know nothing of the protocol, the wire or the session, and
// golang.org/x/sys is imported under child/ only (tests included).
func TestChildImportsNothingAbove(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	above := []string{"protocol", "wireguard", "session", "rpc", "config", "py"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		inChild := pkg == "child" || strings.HasPrefix(pkg, "child/")
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "golang.org/x/sys/") && !inChild {
				t.Errorf("%s imports %s: only child/... may", pkg, imp)
			}
			if inChild && permitted(above, imp) {
				t.Errorf("%s imports %s, a package above child", pkg, imp)
			}
		}
	}
}

// TestNoPackageInit: no package initialisation may start or re-execute
// anything (a process started as a helper is dispatched explicitly, by
// reexec.Dispatch in main). The robust form of that rule: the module has no
// init function at all in its non-test files, nor in any file under child/.
func TestNoPackageInit(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		isTest := strings.HasSuffix(path, "_test.go")
		if d.IsDir() || !strings.HasSuffix(path, ".go") || (isTest && !strings.HasPrefix(rel, "child"+string(filepath.Separator))) {
			return nil
		}
		found++
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s: func init (dispatch explicitly instead: reexec.Dispatch, a TestMain, a sync.Once)", fset.Position(fn.Pos()))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 50 {
		t.Fatalf("scanned %d Go files under %s; the module root was not found", found, root)
	}
}
