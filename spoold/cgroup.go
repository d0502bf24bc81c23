package spoold

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/mountinfo"
	"github.com/vmspool/vmspool/spool"
)

// A job's processes are ended with it (docs/spoold.md, "Ending what a job
// started"). A process group is not enough: a process may leave it
// (setsid) and close the descriptors that mark a job's processes, and it
// then ran on after the job, writing to its log. A cgroup cannot be left
// that way: where spoold may make cgroups (cgroup v2, its own cgroup
// writable: root, or a delegated systemd unit), each job is started
// inside a cgroup of its own (clone3's CLONE_INTO_CGROUP, so that not even
// its first instruction runs outside), and the job's end is the cgroup
// emptied: SIGTERM to each of its processes, then cgroup.kill after the
// kill grace. Without a cgroup, spoold ends the job's process group, its
// session, and every process holding the job's locks or its output pipe
// (group.go).

// The modes of Config.Cgroup.
const (
	CgroupAuto = "auto" // a cgroup per job where spoold can make one
	CgroupOn   = "on"   // a cgroup per job, or spoold does not start
	CgroupOff  = "off"  // never: process groups and sessions only
)

// cgroups makes this daemon's jobs' cgroups, children of spoold's own.
// Their names begin with prefix, which names the spool (its root's device
// and inode) and the host as leases name it (--host: daemons that play
// two hosts on one machine leave each other's jobs alone, as two machines
// would), and end with the job's id: one name a job, so that the cgroup
// left by an attempt of a spoold that died is found by the next attempt's
// on this host, by name, and emptied first.
type cgroups struct {
	dir    string
	prefix string
}

// findCgroups finds spoold's own cgroup v2 directory and checks that a
// cgroup may be made in it. It returns nil and why when it cannot.
func findCgroups(spoolRoot, host string) (*cgroups, error) {
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(spoolRoot)
	if err != nil {
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	h := fnv.New32a()
	h.Write([]byte(host))
	c := &cgroups{dir: own, prefix: fmt.Sprintf("vmspool-%x-%d-%08x-", st.Dev, st.Ino, h.Sum32())}
	probe := filepath.Join(own, fmt.Sprintf("%sprobe-%d", c.prefix, os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cannot make a cgroup in %s: %w", own, err)
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		// cgroup.kill came with Linux 5.14; without it, a job that forks
		// as fast as it is killed could outrun the end.
		return nil, fmt.Errorf("cgroup %s has no cgroup.kill (Linux 5.14 or later)", own)
	}
	return c, nil
}

// ownCgroup is the directory of spoold's cgroup in the cgroup v2
// hierarchy: the path of /proc/self/cgroup's "0::" line, under the mount
// point of the cgroup2 filesystem that holds it (/proc/self/mountinfo).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	path := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path = p
		}
	}
	if path == "" || strings.HasSuffix(path, " (deleted)") {
		return "", errors.New("not in a cgroup v2 hierarchy")
	}
	own := ""
	err = mountinfo.ScanSelf(func(m mountinfo.Mount) bool {
		if m.Type != "cgroup2" {
			return true
		}
		rel, ok := strings.CutPrefix(path, m.Root)
		if m.Root == "/" {
			rel, ok = path, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			return true
		}
		own = filepath.Join(m.Point, rel)
		return false
	})
	if err != nil {
		return "", err
	}
	if own == "" {
		return "", errors.New("no cgroup2 filesystem mounted")
	}
	return own, nil
}

// jobCgroup is the cgroup of one job on this host.
type jobCgroup struct {
	path string
	dir  *os.File // open while the job starts: clone3's CLONE_INTO_CGROUP
}

func (c *cgroups) of(job string) *jobCgroup {
	return &jobCgroup{path: filepath.Join(c.dir, c.prefix+job)}
}

// make makes the job's cgroup, or empties the one an attempt before left
// (its processes are that attempt's, which must not overlap this one),
// and opens it for the job's start.
func (c *cgroups) make(job string, grace time.Duration) (*jobCgroup, error) {
	g := c.of(job)
	for try := 0; ; try++ {
		err := os.Mkdir(g.path, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || try > 0 {
			return nil, fmt.Errorf("cannot make the job's cgroup %s: %w", g.path, err)
		}
		if !g.end(grace) {
			return nil, fmt.Errorf("the job's cgroup %s still holds processes of an attempt before", g.path)
		}
	}
	d, err := os.OpenFile(g.path, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		g.remove()
		return nil, fmt.Errorf("cannot open the job's cgroup %s: %w", g.path, err)
	}
	g.dir = d
	return g, nil
}

// started closes the handle the start needed.
func (g *jobCgroup) started() {
	if g.dir != nil {
		g.dir.Close()
		g.dir = nil
	}
}

// populated reports whether any process is in the cgroup. A cgroup that
// is gone, or cannot be read, holds none this daemon could end.
func (g *jobCgroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(g.path, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "populated 1")
}

// signal sends sig to every process of the cgroup; SIGKILL goes through
// cgroup.kill, which the kernel applies to processes forked meanwhile too.
// It touches the cgroup filesystem only (memory, never the spool's disk),
// so the fence may call it.
func (g *jobCgroup) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		if err := os.WriteFile(filepath.Join(g.path, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	b, err := os.ReadFile(filepath.Join(g.path, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, sig)
		}
	}
}

// end empties the cgroup (SIGTERM, SIGKILL after grace) and removes it.
// It returns false if processes are still in it after all that.
func (g *jobCgroup) end(grace time.Duration) bool {
	if g.populated() {
		g.signal(syscall.SIGTERM)
		if !g.wait(grace) {
			g.signal(syscall.SIGKILL)
			if !g.wait(2 * time.Second) {
				return false
			}
		}
	}
	g.remove()
	return true
}

// wait waits, up to limit, for the cgroup to be empty.
func (g *jobCgroup) wait(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; g.populated(); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
	return true
}

// remove removes the cgroup once it is empty; the kernel may take a moment
// after the last process's exit before it lets the directory go.
func (g *jobCgroup) remove() {
	g.started()
	for i := 0; i < 20; i++ {
		err := syscall.Rmdir(g.path)
		if err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
			return
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
}

// startCgroups decides, once at start, how this daemon ends its jobs, and
// says so in one log line: in a cgroup per job (Config.Cgroup auto or on,
// where spoold can make one), or by process group and session. Cgroups
// that daemons left here are swept (sweepCgroups), at start and then every
// minute until ctx is done.
func (d *Daemon) startCgroups(ctx context.Context) error {
	e := d.log.WithField("worker", d.cfg.Worker)
	if d.cfg.Cgroup == CgroupOff {
		e.WithField("cgroup", "off").Info("jobs are ended by their process group and session (--cgroup off)")
		return nil
	}
	c, err := findCgroups(d.root, d.cfg.Host)
	if err == nil {
		err = probeCgroup(c)
	}
	if err != nil {
		if d.cfg.Cgroup == CgroupOn {
			return fmt.Errorf("spoold: --cgroup on: %w", err)
		}
		e.WithError(err).Info("no cgroup for jobs: they are ended by their process group and session, and a process that leaves both is not (docs/spoold.md)")
		return nil
	}
	d.cg = c
	e.WithField("cgroup", c.dir).Info("jobs are ended with their cgroup")
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			d.sweepCgroups()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// probeCgroup starts a process that exits at once inside a cgroup made
// for it: clone3 may be refused (a seccomp filter that knows it not, as
// containers' default ones did) where mkdir is not.
func probeCgroup(c *cgroups) error {
	g := c.of(fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(g.path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	defer g.remove()
	dir, err := os.OpenFile(g.path, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	var prog string
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			prog = p
			break
		}
	}
	if prog == "" {
		return nil // nothing to probe with: the first job will say
	}
	p, err := os.StartProcess(prog, []string{prog, "-c", ":"}, &os.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}})
	if err != nil {
		return fmt.Errorf("cannot start a process in a cgroup: %w", err)
	}
	p.Wait()
	return nil
}

// sweepCgroups ends what daemons of this spool that died left in their
// jobs' cgroups here, for jobs that have ended since (recovered on another
// host, or whose processes closed the descriptors recovery looks for),
// and removes the empty cgroups of any spool a minute old or more (a
// younger one may be a cgroup another daemon just made for a job it is
// starting; an empty one holds nothing any daemon needs).
func (d *Daemon) sweepCgroups() {
	ents, err := os.ReadDir(d.cg.dir)
	if err != nil {
		return
	}
	for _, ent := range ents {
		if !ent.IsDir() || !strings.HasPrefix(ent.Name(), "vmspool-") {
			continue
		}
		g := &jobCgroup{path: filepath.Join(d.cg.dir, ent.Name())}
		if !g.populated() {
			if fi, err := ent.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				g.remove()
			}
			continue
		}
		job, ok := strings.CutPrefix(ent.Name(), d.cg.prefix)
		if !ok || !spool.ValidID(job) || strings.HasPrefix(job, "probe-") {
			continue
		}
		st, err := d.s.State(job)
		if errors.Is(err, spool.ErrNoJob) || err == nil && st.Final() {
			d.log.WithFields(logrus.Fields{"job": job, "worker": d.cfg.Worker}).Info("ending the processes left in the cgroup of an ended job")
			g.end(d.cfg.KillGrace)
		}
	}
}
