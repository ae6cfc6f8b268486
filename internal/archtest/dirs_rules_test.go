package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionDirsByDescriptor (C646): the session layer, which owns every run's and
// session's directory, never reaches one by path (docs/containment.md §5):
// its non-test files call none of the path-based helpers below, so every
// operation goes through the rundir.Dir held since the directory was made.
func TestSessionDirsByDescriptor(t *testing.T) {
	banned := map[string]bool{
		"os.OpenRoot": true, "os.RemoveAll": true, "os.ReadDir": true, "os.Remove": true,
		"os.Mkdir": true, "os.MkdirAll": true, "os.WriteFile": true, "os.OpenFile": true,
		"rundir.Create": true, "rundir.Remove": true, "rundir.RemoveTree": true,
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "session", "*.go"))
	if err != nil || len(files) < 10 {
		t.Fatalf("session/*.go: %d files, %v", len(files), err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && banned[pkg.Name+"."+sel.Sel.Name] {
				t.Errorf("%s: %s.%s reaches a directory by path (use the worker's rundir.Dir)", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
	}
}
