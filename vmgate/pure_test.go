package vmgate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The packages through which code could open a file, list a directory,
// look up a user, start a process or reach the network. The decision
// imports none of them: a script's verdict can never depend on the
// machine the gate runs on, and deciding never changes it.
var impure = []string{
	"os", "os/exec", "os/user", "os/signal", "io/ioutil", "io/fs", "path/filepath",
	"syscall", "golang.org/x/sys/unix", "net", "net/http", "plugin", "unsafe",
	"mvdan.cc/sh/v3/interp", "mvdan.cc/sh/v3/fileutil",
}

// What the decision may use of mvdan.cc/sh/v3/expand: Format, with a
// Config of its own that sets nothing. Its other entry points expand
// tildes by looking users up, and a Config's ReadDir (or ReadDir2) globs
// on the filesystem ("if nil, globbing is disabled") and its Env would
// read a real environment.
var expandAllowed = map[string]bool{"Config": true, "Format": true}

// TestPure proves that the gate's analyzer touches no file: no file of
// the package (tests aside) imports a package that could, and the one
// use of mvdan.cc/sh's expand passes a Config that sets no hook.
func TestPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no source files: %v", err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		seen++
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		expandName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range impure {
				if path == bad {
					t.Errorf("%s imports %q: the decision must not touch a file or start a process (move it to the command, the server or package machine)", name, path)
				}
			}
			if path == "mvdan.cc/sh/v3/expand" {
				expandName = "expand"
				if imp.Name != nil {
					expandName = imp.Name.Name
				}
			}
		}
		if expandName == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == expandName && !expandAllowed[n.Sel.Name] {
					t.Errorf("%s: expand.%s may read the machine (users, the environment, directories)", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Config" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == expandName && len(n.Elts) > 0 {
						t.Errorf("%s: an expand.Config that sets a field: its hooks (ReadDir, Env) reach the machine", fset.Position(n.Pos()))
					}
				}
			case *ast.AssignStmt:
				for _, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok {
						switch sel.Sel.Name {
						case "ReadDir", "ReadDir2", "Env", "GlobStar", "NullGlob":
							t.Errorf("%s: sets %s of a Config: the decision reads no directory and no environment", fset.Position(n.Pos()), sel.Sel.Name)
						}
					}
				}
			}
			return true
		})
	}
	if seen < 5 {
		t.Fatalf("read %d source files: not the package's directory?", seen)
	}
}
