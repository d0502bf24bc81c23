package tests

// A full disk: the spool lives on a filesystem of 4 MB, which the test
// fills. `spool submit` must fail in one line and leave nothing half
// submitted; spoold must keep running, end nothing wrongly, and carry on
// when space returns.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// diskSmall mounts a small filesystem for the test: a size-limited tmpfs,
// or else a loop-mounted ext4 image; it skips, saying why, when neither
// can be made. It is unmounted when the test ends, failed or not.
func diskSmall(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	umount := func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	}
	out1, err1 := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", mnt).CombinedOutput()
	if err1 == nil {
		t.Cleanup(umount)
		return mnt
	}
	img := filepath.Join(t.TempDir(), "small.img")
	out2, err2 := exec.Command("sh", "-c", `truncate -s 8M "$1" && mkfs.ext4 -q -F "$1" && mount -o loop "$1" "$2"`, "sh", img, mnt).CombinedOutput()
	if err2 == nil {
		t.Cleanup(umount)
		return mnt
	}
	t.Skipf("no small filesystem to fill: mount -t tmpfs: %v: %s; loop-mounted ext4: %v: %s",
		err1, bytes.TrimSpace(out1), err2, bytes.TrimSpace(out2))
	return ""
}

// noFloor turns off spool submit's free-space floor, for the tests of a
// disk that really fills.
var noFloor = []string{"SPOOL_MIN_FREE=0", "SPOOL_MIN_FREE_PERCENT=0", "SPOOL_MIN_FREE_INODES=0"}

// diskFill writes a file until the filesystem refuses another byte.
func diskFill(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 16, 4096, 1} {
		b := make([]byte, chunk)
		for {
			if _, err := f.Write(b); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				break
			}
		}
	}
	f.Sync()
}

// diskNothingHalf checks what ls -a shows: no temporary, and no spec
// without its marker or its result.
func diskNothingHalf(t *testing.T, s *spool.Spool) {
	t.Helper()
	jobs, other, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range other {
		if strings.HasPrefix(n, ".") {
			t.Errorf("a temporary left in the spool: %s", n)
		}
	}
	for job, f := range jobs {
		if st, _ := f.State(); st == spool.New {
			t.Errorf("job %s: a spec without a marker (%b)", job, f)
		}
	}
}

func TestDiskFull(t *testing.T) {
	mnt := diskSmall(t)
	dir := filepath.Join(mnt, "spool")
	flag := filepath.Join(t.TempDir(), "go") // off the small disk
	// The floor is off: this test is about a disk that really fills (the
	// floor's own test is TestLimitsFloor).
	args := []string{"--spool", dir, "--workers", "2", "--lease", "2s", "--rescan", "1s", "--metrics-file", "off", "--min-free", "0", "--min-free-percent", "0", "--min-free-inodes", "0"}
	a := relStart(t, "spoold", args...)
	s := openSpool(t, dir, 300)
	eventually(t, 10*time.Second, 20*time.Millisecond, "the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, spool.GateDir))
		return err == nil
	})
	submit := func(args ...string) (string, string, error) {
		cmd := command(append(raceEnv(), noFloor...), "spool", append([]string{"--spool", dir, "submit"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), stderr.String(), err
	}
	first, _, err := submit("--chat", "f", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	if r := waitEnd(t, s, first, 20*time.Second, 20*time.Millisecond); r.State != spool.Done {
		t.Fatalf("first job: %s %v", r.State, r.Error)
	}
	// A job that runs while the disk fills and ends once it is full, and a
	// job of its chat queued behind it.
	running, _, err := submit("--chat", "r", "--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.05; done; exit 0`, flag)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, 20*time.Millisecond, "the job to run", func() bool {
		st, _ := s.State(running)
		return st == spool.Running
	})
	queued, _, err := submit("--chat", "r", "--", "true")
	if err != nil {
		t.Fatal(err)
	}

	// And one whose time comes once the disk is full: a marker's mtime is
	// its not-before time, set on the temporary before the rename that
	// queues it.
	later := "later-job"
	soon := time.Now().Add(2 * time.Second)
	for _, err := range []error{
		os.WriteFile(s.Path(later+".json"), []byte(`{"chat":"later","argv":["true"]}`), 0o640),
		os.WriteFile(s.Path("."+later+".ready"), nil, 0o640),
		os.Chtimes(s.Path("."+later+".ready"), soon, soon),
		os.Rename(s.Path("."+later+".ready"), s.Path(later+".ready")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	diskFill(t, filepath.Join(mnt, "fill"))
	job, stderr, err := submit("--chat", "full", "--", "true")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("spool submit on a full disk: %v, printed %q; want an error", err, job)
	}
	if lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n"); len(lines) != 1 || !strings.Contains(stderr, "no space left") {
		t.Errorf("spool submit on a full disk said %q; want one line that names the full disk", stderr)
	}
	t.Logf("spool submit on a full disk: exit %d: %s", ee.ExitCode(), strings.TrimSpace(stderr))
	diskNothingHalf(t, s)

	// The running job ends while nothing can be written; the one behind it
	// cannot be claimed (its lease cannot be written). Neither may end
	// wrongly, and the daemon goes on.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The sleeps are the point: windows in which no daemon may exit and no
	// job may end wrongly, the first before a second daemon starts on the
	// full disk, the second after; the count of log lines below is over
	// their 6 s.
	time.Sleep(3 * time.Second)
	b := relStart(t, "spoold", args...) // a daemon that starts on the full disk
	time.Sleep(3 * time.Second)
	if !a.alive() || !b.alive() {
		t.Fatalf("a spoold exited on the full disk: %v %v\n%s\n%s", a.err, b.err, a.logText(), b.logText())
	}
	for _, j := range []string{queued, later} {
		if st, _ := s.State(j); st != spool.Queued {
			t.Errorf("job %s, which could not be claimed on the full disk, is %s; want queued", j, st)
		}
	}
	if st, _ := s.State(running); st.Final() && st != spool.Done {
		r, _ := s.ReadResult(running, st)
		t.Errorf("the job that exited 0 on the full disk ended %s: %s", st, relStr(r.Error))
	}
	diskNothingHalf(t, s)
	// A claim that cannot write its lease is tried again later, not in a
	// loop: one log line per thing that happened, never one per spin.
	for _, p := range []*proc{a, b} {
		n := strings.Count(p.logText(), "no space left")
		t.Logf("spoold %d: %d log lines about the full disk", p.cmd.Process.Pid, n)
		if n > 20 {
			t.Errorf("spoold logged %d errors about the full disk in 6s: a retry loop without a pause", n)
		}
	}

	// Space returns: everything carries on, and the job that exited 0 is
	// recorded done, not as a dead worker's.
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	after, _, err := submit("--chat", "after", "--", "true")
	if err != nil {
		t.Fatalf("spool submit once space returned: %v", err)
	}
	for _, j := range []string{running, queued, later, after} {
		if r := waitEnd(t, s, j, 30*time.Second, 20*time.Millisecond); r.State != spool.Done {
			t.Errorf("job %s once space returned: %s %s, want done", j, r.State, relStr(r.Error))
		}
	}
	a.stop(t, 20*time.Second)
	b.stop(t, 20*time.Second)
	jobs, _, _ := s.Scan()
	for job, f := range jobs {
		if f.States() != 1 {
			t.Errorf("job %s in %d states (%b)", job, f.States(), f)
		}
	}
	diskNothingHalf(t, s)
}

// TestDiskFullRefused: the disk fills between a claim and the result of a
// job the daemon refuses (a spec that names nothing to run), with one
// daemon on the spool: the claim takes the last page, the result finds
// none. When space returns, the job must still end, failed with its
// reason, rather than stay claimed by a daemon that no longer acts on it.
func TestDiskFullRefused(t *testing.T) {
	mnt := diskSmall(t)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != 0x01021994 { // TMPFS_MAGIC: a page a file, nothing else
		t.Skip("needs a tmpfs to leave exactly one page free")
	}
	dir := filepath.Join(mnt, "spool")
	d := relStart(t, "spoold", "--spool", dir, "--lease", "1s", "--rescan", "1s", "--metrics-file", "off", "--min-free", "0", "--min-free-percent", "0", "--min-free-inodes", "0")
	s := openSpool(t, dir, 300)
	eventually(t, 10*time.Second, 20*time.Millisecond, "the tree", func() bool {
		_, err := os.Stat(filepath.Join(dir, spool.GateDir))
		return err == nil
	})
	job := "refused-job"
	soon := time.Now().Add(2 * time.Second)
	for _, err := range []error{
		os.WriteFile(s.Path(job+".json"), []byte(`{"chat":"r","argv":[]}`), 0o640),
		os.WriteFile(s.Path("."+job+".ready"), nil, 0o640),
		os.Chtimes(s.Path("."+job+".ready"), soon, soon),
		os.Rename(s.Path("."+job+".ready"), s.Path(job+".ready")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Fill all but one page.
	diskFill(t, filepath.Join(mnt, "fill"))
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(mnt, "fill"))
	if err := os.Truncate(filepath.Join(mnt, "fill"), fi.Size()-int64(st.Bsize)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // the point: a window in which spoold must not exit (its claim takes the last page, the result finds none)
	if !d.alive() {
		t.Fatalf("spoold exited: %v", d.err)
	}
	stNow, _ := s.State(job)
	t.Logf("job %s on the full disk: %s", job, stNow)
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	r := waitEnd(t, s, job, 15*time.Second, 20*time.Millisecond)
	if r.State != spool.Failed || !strings.Contains(relStr(r.Error), "argv") {
		t.Errorf("job %s: %s %s; want failed with the spec's reason", job, r.State, relStr(r.Error))
	}
	d.stop(t, 10*time.Second)
}
