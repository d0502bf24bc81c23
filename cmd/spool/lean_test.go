package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLeanImports keeps out of `spool` what a shell's submit would pay for
// at every start without using it: crypto/rand's FIPS 140 module and
// logrus (README, "Performance": the binary's start is a third of a
// submit's cost over an empty Go program).
func TestLeanImports(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, heavy := range []string{"crypto/rand", "crypto/internal/fips140", "github.com/sirupsen/logrus", "net/http"} {
			if pkg == heavy || strings.HasPrefix(pkg, heavy+"/") {
				t.Errorf("spool links %s, which its start pays for on every submit", pkg)
			}
		}
	}
}
