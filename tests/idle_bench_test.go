package tests

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
	"golang.org/x/sys/unix"
)

// BenchmarkIdlePoll is an idle `spoold --poll 1s` on GlusterFS over a spool
// that keeps many ended jobs until gc (IDLEPOLL_JOBS, 1,000,000 by default:
// 2,000,000 names, a spec and a result each). It reports the CPU spoold
// uses idle (of one core, over 30 s, and its host's GlusterFS client's
// beside it), the time of spoold's first listing of the root at its start
// (what every poll cost before a poll looked at the root's stamp first),
// submit-to-start of new jobs, which must stay within two polls (spool
// submit rings the doorbell), and submit-to-start of a hand submission
// (no bell: the root's listing finds it; IDLEPOLL_HAND=off skips it).
//
// The ended jobs are written into the brick directly, not through a
// mount (two million creates over FUSE take the better part of an hour),
// each with the identity GlusterFS gives a file it creates (its gfid),
// without which it would not list them.
func BenchmarkIdlePoll(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("IDLEPOLL_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			b.Fatalf("IDLEPOLL_JOBS=%q: want a number of jobs", v)
		}
	}
	idleBrickFS(b, n)
	c := mhStart(b, "gluster")
	brick := filepath.Join(c.export, "..", "..", "brick", "spool", "spool")
	if _, err := os.Stat(brick); err != nil {
		b.Skipf("skipped: the brick is not where scripts/engines/gluster.sh puts it: %v", err)
	}
	// GlusterFS lists only files that carry its identity, a gfid: the
	// xattr and a hard link under the brick's .glusterfs/, as its own
	// creates leave them.
	gfids := filepath.Join(brick, "..", ".glusterfs")
	made := map[string]bool{}
	began := time.Now()
	for i := 0; i < n; i++ {
		// Empty: a poll reads names, never contents.
		id := fmt.Sprintf("01IDLE%020d", i)
		for _, ext := range []string{spool.ExtSpec, spool.ExtDone} {
			path := filepath.Join(brick, id+ext)
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o640)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
			var g [16]byte
			binary.LittleEndian.PutUint64(g[:8], rand.Uint64())
			binary.LittleEndian.PutUint64(g[8:], rand.Uint64())
			g[6], g[8] = g[6]&0x0f|0x40, g[8]&0x3f|0x80
			if err := unix.Setxattr(path, "trusted.gfid", g[:], 0); err != nil {
				b.Fatalf("setxattr %s: %v", path, err)
			}
			h := hex.EncodeToString(g[:])
			uuid := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
			dir := filepath.Join(gfids, h[:2], h[2:4])
			if !made[dir] {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					b.Fatal(err)
				}
				made[dir] = true
			}
			if err := os.Link(path, filepath.Join(dir, uuid)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("%d ended jobs written into the brick in %v", n, time.Since(began).Round(time.Second))
	// What ls sees through the file server's mount: every name.
	began = time.Now()
	d, err := os.Open(c.spool)
	if err != nil {
		b.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil || len(names) < 2*n {
		b.Fatalf("the spool lists %d names through the mount (%v); want at least %d", len(names), err, 2*n)
	}
	b.Logf("the spool's root lists %d names through the mount in %v", len(names), time.Since(began).Round(100*time.Millisecond))
	for _, i := range []int{0, n / 2, n - 1} {
		if n == 0 {
			break
		}
		if _, err := os.Stat(filepath.Join(c.spool, fmt.Sprintf("01IDLE%020d", i)+spool.ExtDone)); err != nil {
			b.Fatalf("a job written into the brick is not seen through the mount: %v", err)
		}
	}
	const poll = time.Second
	c.serveWithin = 30 * time.Minute // its first listing reads every name
	began = time.Now()
	h := c.spooldHost("idle", "h1", nil, "--poll", poll.String(), "--metrics-file", "off")
	defer h.stop()
	spooldPID, clientPID := 0, 0
	for pid, cmd := range h.procs() {
		switch {
		case strings.HasPrefix(cmd, "spoold "):
			spooldPID = pid
		case strings.HasPrefix(cmd, "glusterfs "):
			clientPID = pid
		}
	}
	if spooldPID == 0 {
		b.Fatal("no spoold on the host")
	}
	// spoold says it serves before its first listing of the root: that
	// listing is over once spoold goes quiet (under 5 % of a core for 3 s).
	for {
		t0, at := cpuTicks(spooldPID), time.Now()
		time.Sleep(3 * time.Second) // the window judged
		if float64(cpuTicks(spooldPID)-t0)/time.Since(at).Seconds() < 5 {
			break
		}
		if time.Since(began) > 30*time.Minute {
			b.Fatal("spoold still busy 30 minutes after its start")
		}
	}
	start := time.Since(began)
	b.Logf("spoold quiet %v after its start (its first listing of the root)", start.Round(100*time.Millisecond))
	b.ReportMetric(start.Seconds(), "start_s")
	const window = 30 * time.Second
	s0, c0, t0 := cpuTicks(spooldPID), cpuTicks(clientPID), time.Now()
	time.Sleep(window) // the idle time measured
	s1, c1, el := cpuTicks(spooldPID), cpuTicks(clientPID), time.Since(t0).Seconds()
	spooldCPU := float64(s1-s0) / el // clock ticks of 10 ms a second: % of a core
	clientCPU := float64(c1-c0) / el
	b.ReportMetric(spooldCPU, "idle_cpu_%")
	b.ReportMetric(clientCPU, "client_cpu_%")
	var waits []float64
	for i := 0; i < 5; i++ {
		time.Sleep(3 * poll) // idle again: the root settled
		waits = append(waits, c.submitToStart(b, "new").Seconds()*1000)
	}
	slices.Sort(waits)
	b.ReportMetric(waits[len(waits)/2], "start_p50_ms")
	b.ReportMetric(waits[len(waits)-1], "start_max_ms")
	b.Logf("idle over %d ended jobs: spoold %.2f%% of a core, its GlusterFS client %.2f%%; a new job started after %.0f to %.0f ms (--poll %v)",
		n, spooldCPU, clientCPU, waits[0], waits[len(waits)-1], poll)
	if waits[len(waits)-1] > float64(2*poll/time.Millisecond) {
		b.Logf("a new job waited up to %.0f ms, more than two polls (%v)", waits[len(waits)-1], 2*poll)
	}
	// A hand submission (coreutils: no bell rung) is found by the root's
	// listing, which over this history takes at most a tenth of spoold's
	// time (docs/spoold.md, "The doorbell").
	if os.Getenv("IDLEPOLL_HAND") != "off" {
		began := time.Now()
		id := fmt.Sprintf("hand%d", began.UnixNano())
		spec, _ := json.Marshal(map[string]any{"chat": "hand", "argv": mhJobArgv("hand", 0, ""), "env": map[string]string{"RUNS": c.runs}})
		for _, f := range []struct {
			ext  string
			data []byte
		}{{spool.ExtSpec, spec}, {spool.ExtReady, nil}} {
			tmp := filepath.Join(c.spool, "."+id+f.ext)
			if err := os.WriteFile(tmp, f.data, 0o640); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(c.spool, id+f.ext)); err != nil {
				b.Fatal(err)
			}
		}
		hand := c.startedAfter(b, id, began, 30*time.Minute, 100*time.Millisecond)
		b.ReportMetric(hand.Seconds(), "hand_start_s")
		b.Logf("a hand submission (no bell) started after %v", hand.Round(100*time.Millisecond))
	}
	b.ReportMetric(0, "ns/op")
}

// cpuTicks is the user and system time of pid, in clock ticks (0 for no
// pid).
func cpuTicks(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// idleBrickFS gives the engine's state (its brick) a filesystem of its own
// with inodes for n jobs, so that millions of files do not take the
// machine's inodes: an ext4 image, sparse, mounted on a loop device, where
// scripts/engines/gluster.sh then keeps its state (VMSP_BASE).
func idleBrickFS(b *testing.B, n int) {
	if os.Geteuid() != 0 {
		b.Skip("skipped: needs root")
	}
	for _, p := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			b.Skipf("skipped: no %s: %v", p, err)
		}
	}
	dir := b.TempDir()
	img, mnt := filepath.Join(dir, "brick.img"), filepath.Join(dir, "fs")
	os.MkdirAll(mnt, 0o755)
	inodes := 2*n + 300_000           // and .glusterfs/'s 65,536 directories
	size := int64(inodes)*300 + 1<<30 // the inode tables, directories, slack
	if out, err := exec.Command("truncate", "-s", strconv.FormatInt(size, 10), img).CombinedOutput(); err != nil {
		b.Fatalf("truncate: %v: %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-N", strconv.Itoa(inodes), "-E", "lazy_itable_init=1,lazy_journal_init=1", img).CombinedOutput(); err != nil {
		b.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		b.Skipf("skipped: cannot mount a loop device: %v: %s", err, out)
	}
	b.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	old, had := os.LookupEnv("VMSP_BASE")
	os.Setenv("VMSP_BASE", filepath.Join(mnt, "gluster"))
	b.Cleanup(func() {
		if had {
			os.Setenv("VMSP_BASE", old)
		} else {
			os.Unsetenv("VMSP_BASE")
		}
	})
}
