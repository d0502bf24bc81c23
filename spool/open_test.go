package spool

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOneOpen keeps every open of this package in the one protected open
// (open.go): a call that opens a file (OpenFile, Open, Openat,
// ReadFile...) anywhere else is a name of the tree opened without
// O_NOFOLLOW, O_NONBLOCK or the fstat, as MarkClaim's was (a FIFO at a
// claim mark hung spoold). The few opens of what is not the tree are
// listed by the function that makes them.
func TestOneOpen(t *testing.T) {
	opens := map[string]bool{"Open": true, "OpenFile": true, "OpenRoot": true, "OpenInRoot": true,
		"Openat": true, "Openat2": true, "ReadFile": true, "WriteFile": true, "Create": true, "CreateTemp": true,
		"NewPendingFile": true, "CreateFile": true}
	allowed := map[string]string{
		"openRegular":     "the one protected open",
		"openRegularAt":   "the one protected open, by descriptor",
		"openDir":         "the protected open of a directory",
		"writeFile":       "the atomic write through an os.Root (internal/atomicfile, renameio's): a new temporary, O_CREAT|O_EXCL",
		"writeSynced":     "writeFile without the directory's sync",
		"writeAt":         "the atomic write by descriptor (internal/atomicfile): a new temporary, O_CREAT|O_EXCL|O_NOFOLLOW",
		"Open":            "os.OpenRoot of the spool's own path, given by the operator",
		"subRoot":         "a directory of the tree as an os.Root, lstat'd first",
		"OpenSubdirGroup": "a directory of the tree as an os.Root, checked the same as the handle opened (OpenSubdir calls it)",
		"urandom":         "/dev/urandom",
		"processStat":     "/proc/PID/stat",
		"BootID":          "/proc/sys/kernel/random/boot_id",
		"checkAbove":      "O_PATH handles of the directories above the spool, which open nothing to read or write",
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			var name string
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name = d.Name.Name
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					if vs, ok := sp.(*ast.ValueSpec); ok && len(vs.Names) > 0 {
						name = vs.Names[0].Name
					}
				}
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !opens[sel.Sel.Name] {
					return true
				}
				if _, ok := allowed[name]; !ok {
					t.Errorf("%s: %s calls %s outside the one protected open (spool/open.go)", fset.Position(call.Pos()), name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// A FIFO in place of each name the package opens to write, append or
// lock is refused at once (or, for a claim mark, replaced), never waited
// on: each call runs with a deadline.
func TestOpenFIFO(t *testing.T) {
	s := testSpool(t)
	if err := s.EnsureDir(ChatsDir); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureDir(ChatDir("c")); err != nil {
		t.Fatal(err)
	}
	fifo := func(name string) {
		t.Helper()
		p := s.Path(name)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	within := func(what string, fn func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s blocked on a FIFO", what)
			return nil
		}
	}
	fifo(ChatDir("c") + "/j.claim")
	if err := within("MarkClaim", func() error { return s.MarkClaim("c", "j") }); err != nil {
		t.Errorf("MarkClaim over a FIFO: %v; want the mark in its place", err)
	}
	if fi, err := os.Lstat(s.Path(ChatDir("c") + "/j.claim")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the claim mark: %v %v", fi, err)
	}
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{ChatDir("c") + "/lock", func() error { f, _, err := s.LockChat("c"); f.Close(); return err }},
		{"j.events", func() error { _, err := s.AppendEvent("j", Event{Text: "x"}); return err }},
		{"j.log", func() error { f, err := s.OpenLog("j"); f.Close(); return err }},
		{"j.done", func() error { _, err := s.ReadResult("j", Done); return err }},
	} {
		fifo(c.name)
		if err := within(c.name, c.fn); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("%s a FIFO: %v; want it refused as one", c.name, err)
		}
	}
}
