// Package docs holds the project's documentation; its one test keeps
// layout.md true.
package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestLayout: layout.md, the map of where to change what, names every
// directory of the repository that holds Go code and every top-level
// directory (as a code span, `dir` or a path under it), and every file it
// names by a path from the repository's root exists. A package added, moved
// or removed without the map fails here.
func TestLayout(t *testing.T) {
	root := ".."
	b, err := os.ReadFile("layout.md")
	if err != nil {
		t.Fatal(err)
	}
	var spans []string
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(b), -1) {
		spans = append(spans, strings.TrimSuffix(m[1], "/"))
	}
	named := func(dir string) bool {
		for _, s := range spans {
			if s == dir || strings.HasPrefix(s, dir+"/") {
				return true
			}
		}
		return false
	}
	ignored := ignoredDirs(t, root)

	var missing []string
	tops, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tops {
		if e.IsDir() && e.Name() != ".git" && !ignored[e.Name()] && !named(e.Name()) {
			missing = append(missing, e.Name()+"/ (a top-level directory)")
		}
	}
	for _, dir := range goDirs(t, root, ignored) {
		if !named(dir) {
			missing = append(missing, dir+" (a Go package)")
		}
	}
	for _, m := range missing {
		t.Errorf("docs/layout.md does not name %s: give it a row", m)
	}

	// Files named by their path from the root: a top-level directory,
	// then a file with an extension (spool/tree.go, clients/python/vmspool.py).
	file := regexp.MustCompile(`^[.A-Za-z0-9_-]+(/[A-Za-z0-9_.<>-]+)*\.[a-z]+$`)
	for _, s := range spans {
		if !file.MatchString(s) || strings.ContainsAny(s, "<>") || !strings.Contains(s, "/") {
			continue
		}
		top := strings.SplitN(s, "/", 2)[0]
		if fi, err := os.Stat(filepath.Join(root, top)); err != nil || !fi.IsDir() {
			continue // a name of the spool's tree (watchd/token), not of the repository
		}
		if _, err := os.Stat(filepath.Join(root, s)); err != nil {
			t.Errorf("docs/layout.md names %s, which does not exist", s)
		}
	}
}

// goDirs lists the directories under root that hold a .go file, as paths
// from root, leaving out testdata, hidden and ignored directories.
func goDirs(t *testing.T, root string, ignored map[string]bool) []string {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || ignored[rel]) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
				seen[dir] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// ignoredDirs reads the directories .gitignore anchors at the root
// (/bin/, /var/): a build's output, not the repository's.
func ignoredDirs(t *testing.T, root string) map[string]bool {
	out := map[string]bool{}
	f, err := os.Open(filepath.Join(root, ".gitignore"))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/") {
			out[strings.Trim(l, "/")] = true
		}
	}
	return out
}
