package tests

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// TestSpooldUnwritable: spoold on a tree it may read but not write exits
// at once, 1, in one line naming the spool and what to do. It used to log
// "serving" and leave every job queued, each claim failing on the chat's
// lock. As root it runs as nobody on root's tree; as anyone else on its
// own tree made read-only.
func TestSpooldUnwritable(t *testing.T) {
	base, err := os.MkdirTemp("", "vmspool-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
		os.RemoveAll(base)
	})
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "spool")
	s, err := spool.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cmd := command(raceEnv(), "spoold", "--spool", dir)
	if os.Geteuid() == 0 {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
		os.Chmod(binDir, 0o755) // nobody runs the built spoold
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	} else {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o555) })
	}
	code, out := exitsAtStart(t, cmd, 10*time.Second, "spoold served a spool it cannot write")
	out = strings.TrimSpace(out)
	if code != 1 || strings.Count(out, "\n") != 0 || !strings.Contains(out, "spool "+dir+": ") ||
		!strings.Contains(out, "cannot write") || !strings.Contains(out, "run spoold as the tree's owner") {
		t.Fatalf("spoold on an unwritable spool: exit %d, want 1 and one line naming it and what to do:\n%s", code, out)
	}
}
