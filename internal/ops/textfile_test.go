package ops

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A user who can write the textfile's directory raced the old writer: its
// temporary took the predictable name path+<pid> and was then chmodded by
// name, which follows a link swapped in there, so a 0600 file of anyone's
// became 0644. The attacker here swaps links in at that name, and at the
// final name, for as long as the writer writes; the victim keeps its mode.
func TestWriteTextfileLinkRace(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	victim := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(victim, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spoold.prom")
	reg := NewRegistry("spoold", false)
	NewSpooldMetrics(reg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		names := []string{path + strconv.Itoa(os.Getpid()), path}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n := names[i%len(names)]
			os.Remove(n)
			os.Symlink(victim, n)
		}
	}()
	for i := 0; i < 300; i++ {
		WriteTextfileMode(path, reg, PublicTextfileMode)
	}
	close(stop)
	wg.Wait()
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(victim)
	if fi.Mode().Perm() != 0o600 || string(b) != "secret\n" {
		t.Fatalf("the victim is now mode %v with %q", fi.Mode().Perm(), b)
	}
}

// A symlink in place of the textfile's directory is refused: nothing is
// written where it points.
func TestWriteTextfileSymlinkDir(t *testing.T) {
	outside := t.TempDir()
	link := filepath.Join(t.TempDir(), "metrics")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry("spoold", false)
	err := WriteTextfileMode(filepath.Join(link, "x.prom"), reg, PublicTextfileMode)
	if err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("err = %v; want a refusal of the symlink", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}
