// Package server is the script gate as a daemon over $SPOOL_DIR/gate/,
// the one `vmgate serve` runs: the agent's side writes a request (a
// script) into gate/in/, and the daemon writes the verdict into gate/out/
// before anything happens, then, with a machine configured, runs an
// allowed script there (package machine) and records its end. The
// decision itself is package vmgate's, which touches no file; this
// package only moves files, and only through package spool, which holds
// each gate directory open from the start (docs/gate.md, "serve").
package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/vmgate"
	"github.com/vmspool/vmspool/vmgate/machine"
)

// The serve layout under $SPOOL_DIR/gate/ (docs/gate.md):
//
//	in/<id>.sh        a request: the script, written atomically by the agent's side
//	out/<id>.json     the verdict, written atomically before anything else happens
//	out/<id>.log      with a machine: the allowed script's stdout and stderr
//	out/<id>.exit     with a machine: {"id","exit","started","finished","error"}, written last
//	out/<id>.owner    with a machine, while it runs: "host pid" of the daemon that runs it
//	done/<id>.sh      the request once its verdict is written (the move is the claim)
//	corrupt/<name>    a request that is not <id>.sh or cannot be read, with <name>.why
const (
	InDir      = "in"
	OutDir     = "out"
	DoneDir    = "done"
	CorruptDir = "corrupt"
)

// MaxRequest bounds a request's size: a bigger one is moved aside.
const MaxRequest = 4 << 20

// Metrics is what the server counts; *ops.GateMetrics fits.
type Metrics interface {
	Decision(allowed bool, reason, git string, took time.Duration)
	RequestError()
}

// Config configures Serve. The library reads no flags or
// environment: cmd/vmgate builds this from its flags.
type Config struct {
	Spool    *spool.Spool     // the tree; the server works in its gate/
	Gate     *vmgate.Gate     // nil: the default gate
	Machine  *machine.Machine // nil: decide only
	Log      *logrus.Logger
	Poll     time.Duration   // > 0: poll at this interval instead of inotify (NFS, FUSE)
	Rescan   time.Duration   // the safety net's rescan of in/ (default 1m)
	Parallel int             // allowed scripts run at once (default 2)
	Timeout  time.Duration   // > 0: a run is stopped after this long
	Grace    time.Duration   // on shutdown, runs may finish for this long (default 10s)
	Now      <-chan struct{} // closed (a second signal): stop the runs at once, grace or not
	Metrics  Metrics
	Ready    func() // called once the watch is set and the first scan is done
	Beat     func() // called each time the loop goes round, at least every 5s (a watchdog's pulse)
	// WritersGroup, when > 0, is the gid of the group that may write
	// requests: in/ is given that group and mode 0770. When 0, in/ is
	// 0750: only the spool's owner (and root) writes requests, and the
	// spool's group, its readers, cannot. Who may have written a request
	// the server reads is the Spool's to say (TrustOwners, TrustMembers):
	// one written by anyone else is moved to corrupt/ and never run.
	WritersGroup int
}

// VerdictFile is the document out/<id>.json.
type VerdictFile struct {
	ID string `json:"id"`
	vmgate.Verdict
	Decided float64 `json:"decided"` // seconds since the epoch
	Run     bool    `json:"run"`     // a machine will run it: wait for out/<id>.exit
	SHA256  string  `json:"sha256"`  // of the request decided, so a reused id is decided again
}

// ExitFile is the document out/<id>.exit.
type ExitFile struct {
	ID       string  `json:"id"`
	Exit     *int    `json:"exit"` // null when the run's end is not known
	Started  float64 `json:"started"`
	Finished float64 `json:"finished"`
	Error    string  `json:"error,omitempty"`
}

type server struct {
	cfg Config
	// dirs are the gate's four directories, each opened once at start by
	// package spool, without following a symlink: every read, write,
	// rename and mode change goes through these handles, so that a
	// symlink planted in gate/ or swapped in later leads nowhere.
	dirs    map[string]*spool.Subdir
	log     *logrus.Logger
	runs    sync.WaitGroup
	slots   chan struct{}
	runCtx  context.Context
	stopRun context.CancelFunc
}

// Serve runs the gate over cfg.Dir until ctx is done. It creates the
// directories it needs (in/ 0750, or 0770 and cfg.WritersGroup's so that
// that group may write requests; the others 0750) and returns an error
// only if it cannot start.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Spool == nil {
		return errors.New("vmgate: no spool")
	}
	if err := cfg.fill(); err != nil {
		return err
	}
	dirs, err := openGateDirs(cfg.Spool, cfg.WritersGroup)
	if err != nil {
		return err
	}
	defer func() {
		for _, d := range dirs {
			d.Close()
		}
	}()
	s := &server{cfg: cfg, log: cfg.Log, slots: make(chan struct{}, cfg.Parallel), dirs: dirs}
	s.runCtx, s.stopRun = context.WithCancel(context.Background())
	defer s.stopRun()

	// The watch goes on before the first scan, or requests written in
	// between would never be seen.
	w, err := cfg.Spool.Watch(spool.WatchConfig{Poll: cfg.Poll, Rescan: cfg.Rescan}, spool.GateDir+"/"+InDir)
	if err != nil {
		return fmt.Errorf("vmgate: %w (use --poll)", err)
	}
	defer w.Close()
	s.recover()
	s.scan(ctx)
	if cfg.Ready != nil {
		cfg.Ready()
	}
	s.loop(ctx, w.C)
	return nil
}

// fill sets the defaults of what cfg leaves zero.
func (cfg *Config) fill() error {
	if cfg.Gate == nil {
		g, err := vmgate.New()
		if err != nil {
			return err
		}
		cfg.Gate = g
	}
	if cfg.Log == nil {
		cfg.Log = logrus.New()
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 2
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = time.Minute
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Machine != nil {
		m := *cfg.Machine
		m.OwnGroup = true
		cfg.Machine = &m
	}
	return nil
}

// loop handles requests as they come (a change of in/: a name, or a
// Look that reads it whole) until ctx is done; then it lets the runs
// finish within the grace.
func (s *server) loop(ctx context.Context, changes <-chan spool.Change) {
	// The heartbeat shows a watchdog that the loop is not stuck, even when
	// no request comes.
	heart := time.NewTicker(5 * time.Second)
	defer heart.Stop()
	for {
		if s.cfg.Beat != nil {
			s.cfg.Beat()
		}
		select {
		case <-heart.C:
		case <-ctx.Done():
			s.shutdown()
			return
		case c, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			switch {
			case c.Op&spool.Created != 0:
				// Requests arrive by rename, a Create of their name.
				s.handle(ctx, c.Name)
			case c.Op == spool.Look:
				if c.Err != nil {
					s.log.WithError(c.Err).Warn("in/: rescanning")
				}
				s.scan(ctx)
			}
		}
	}
}

func (s *server) shutdown() {
	done := make(chan struct{})
	go func() { s.runs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.Grace):
		s.log.Warn("stopping the scripts still running")
		s.stopRun()
		<-done
	case <-s.cfg.Now:
		s.log.Warn("stopping the scripts still running, now")
		s.stopRun()
		<-done
	}
}

func (s *server) scan(ctx context.Context) {
	ents, err := s.dirs[InDir].Entries()
	if err != nil {
		s.log.WithError(err).Error("scan")
		return
	}
	for _, e := range ents {
		if ctx.Err() != nil {
			return
		}
		s.handle(ctx, e.Name())
	}
}

// recover finds runs a killed daemon left without an end and says so in
// their out/<id>.exit, so a reader waiting for one is never left waiting.
func (s *server) recover() {
	out, done := s.dirs[OutDir], s.dirs[DoneDir]
	ents, err := out.Entries()
	if err != nil {
		return
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(id, ".") || !spool.ValidID(id) {
			continue
		}
		if _, err := out.Lstat(id + ".exit"); err == nil {
			continue
		}
		if _, err := done.Lstat(id + ".sh"); err != nil {
			continue // still in in/: it never ran, and will be handled
		}
		var vf VerdictFile
		data, err := out.Read(e.Name(), maxDoc)
		if err != nil || json.Unmarshal(data, &vf) != nil || !vf.Run {
			continue
		}
		// The run's owner: a live process (this host's, or any other
		// host's, which the gate cannot see) still has it.
		if own, err := out.Read(id+".owner", maxDoc); err == nil {
			host, pid, _ := strings.Cut(strings.TrimSpace(string(own)), " ")
			n, _ := strconv.Atoi(pid)
			if me, _ := os.Hostname(); host != me || n > 0 && syscall.Kill(n, 0) != syscall.ESRCH {
				continue
			}
		}
		now := epoch(time.Now())
		s.writeJSON(OutDir, id+".exit", ExitFile{ID: id, Started: now, Finished: now, Error: "vmgate stopped while the script ran; it may have run in part"})
	}
}

func (s *server) handle(ctx context.Context, name string) {
	if strings.HasPrefix(name, ".") {
		return // temporaries (renameio's, mv's) are never read
	}
	id, ok := strings.CutSuffix(name, ".sh")
	if !ok || !spool.ValidID(id) {
		s.aside(name, "not a request: the name must be <id>.sh with id matching ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
		return
	}
	in, out := s.dirs[InDir], s.dirs[OutDir]
	data, err := in.Read(name, MaxRequest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return // taken by another daemon, or a repeated event
	case errors.Is(err, spool.ErrNotRegular):
		s.aside(name, "not a regular file")
		return
	case errors.Is(err, spool.ErrTooLarge):
		s.aside(name, fmt.Sprintf("larger than %d bytes", MaxRequest))
		return
	case errors.Is(err, spool.ErrUntrusted):
		// Whoever may write in/ may have the machine run their script: a
		// request is decided and run only when its owner is trusted, as
		// a spec is by spoold. The file whose owner was checked is the
		// one that was read.
		s.aside(name, "not decided and never run: "+err.Error()+"; a request must be written by vmgate serve's own user or root, or by a member of its --writers-group")
		return
	case err != nil:
		s.aside(name, "cannot be read: "+err.Error())
		return
	}
	began := time.Now()
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	var vf VerdictFile
	if old, err := out.Read(id+".json", maxDoc); err == nil && json.Unmarshal(old, &vf) == nil && vf.ID == id && vf.SHA256 == digest {
		// A daemon died after the verdict and before the move: the
		// decision stands; it is not made twice. (A verdict of another
		// script under a reused id does not count.)
	} else {
		// A reused id: what an earlier run of it left must not be read
		// as this request's.
		_ = out.Remove(id + ".exit")
		_ = out.Remove(id + ".log")
		_ = out.Remove(id + ".owner")
		vf = VerdictFile{ID: id, Verdict: s.cfg.Gate.Check(string(data)), Decided: epoch(time.Now()), SHA256: digest}
		vf.Run = vf.Allowed && s.cfg.Machine != nil
		if err := s.writeJSON(OutDir, id+".json", vf); err != nil {
			s.log.WithError(err).WithField("id", id).Error("cannot write the verdict; the request stays for a retry")
			s.metricsError()
			return
		}
	}
	reason, git := "", ""
	if vf.Reason != nil {
		reason = *vf.Reason
	}
	if vf.Git != nil {
		git = *vf.Git
	}
	// The move is the claim: of two daemons deciding the same request,
	// only the one whose rename succeeds runs it.
	if err := in.MoveTo(name, s.dirs[DoneDir], name); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.WithError(err).WithField("id", id).Error("cannot move the request to done/")
		}
		return
	}
	s.log.WithFields(logrus.Fields{"id": id, "allowed": vf.Allowed, "reason": reason, "git": git}).Info("verdict")
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Decision(vf.Allowed, reason, git, time.Since(began))
	}
	if vf.Run {
		// The owner file says who runs it, so that another daemon's start
		// does not take a live run for one a crash left behind.
		host, _ := os.Hostname()
		_ = s.writeDoc(OutDir, id+".owner", fmt.Appendf(nil, "%s %d\n", host, os.Getpid()))
		s.runs.Add(1)
		go s.run(id, string(data))
	}
}

func (s *server) metricsError() {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.RequestError()
	}
}

func (s *server) run(id, script string) {
	defer s.runs.Done()
	s.slots <- struct{}{}
	defer func() { <-s.slots }()
	ctx := s.runCtx
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	ef := ExitFile{ID: id, Started: epoch(time.Now())}
	out, err := s.dirs[OutDir].Create(id + ".log")
	if err != nil {
		ef.Error = "cannot open the log: " + err.Error()
	} else {
		code, err := s.cfg.Machine.Run(ctx, script, nil, out, out)
		out.Close()
		ef.Exit = &code
		switch {
		case err != nil:
			ef.Error = "cannot start the machine's shell: " + err.Error()
		case ctx.Err() == context.DeadlineExceeded:
			ef.Error = "stopped after " + s.cfg.Timeout.String()
		case s.runCtx.Err() != nil:
			ef.Error = "stopped: vmgate was shutting down"
		}
	}
	ef.Finished = epoch(time.Now())
	if err := s.writeJSON(OutDir, id+".exit", ef); err != nil {
		s.log.WithError(err).WithField("id", id).Error("cannot write the exit")
	}
	_ = s.dirs[OutDir].Remove(id + ".owner")
	l := s.log.WithField("id", id)
	if ef.Exit != nil {
		l = l.WithField("exit", *ef.Exit)
	}
	l.Info("ran")
}

// aside moves a request that cannot be one to corrupt/, with the reason
// beside it, so that it is neither lost nor read again.
func (s *server) aside(name, why string) {
	in, bad := s.dirs[InDir], s.dirs[CorruptDir]
	if _, err := in.Lstat(name); err != nil {
		return
	}
	dst := name
	if _, err := bad.Lstat(dst); err == nil {
		dst = fmt.Sprintf("%s.%d", name, time.Now().UnixNano())
	}
	// The rename moves the name, never what a symlink there points to.
	if err := in.MoveTo(name, bad, dst); err != nil {
		s.log.WithError(err).WithField("name", name).Error("cannot move a bad request aside")
		return
	}
	// The reason is a document like any other: a reader never sees it half
	// written.
	if err := s.writeDoc(CorruptDir, dst+".why", []byte(why+"\n")); err != nil {
		s.log.WithError(err).WithField("name", name).Error("cannot write why a request was moved aside")
	}
	s.log.WithFields(logrus.Fields{"name": name, "why": why}).Warn("request moved to corrupt/")
	s.metricsError()
}

func (s *server) writeJSON(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.writeDoc(dir, name, append(data, '\n'))
}

// writeDoc replaces dir/name atomically (and durably) with data, through
// the directory's handle.
func (s *server) writeDoc(dir, name string, data []byte) error {
	return s.dirs[dir].Write(name, data)
}

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// maxDoc bounds what the server reads of its own documents (a verdict, an
// owner file): anything larger was not written by it.
const maxDoc = 1 << 20

// gateDirs are the gate's directories and their modes, all 0750: the
// spool's group reads them and never writes (in/ is 0770 for a writers
// group only, openGateDirs).
var gateDirs = []struct {
	name string
	mode os.FileMode
}{{InDir, 0o750}, {OutDir, 0o750}, {DoneDir, 0o750}, {CorruptDir, 0o750}}

// openGateDirs opens gate/ and its directories through the spool (made
// where missing, a symlink refused, modes set through descriptors). With
// a writers group, in/ is given that group, then mode 0770; the group of
// gate/ (the spool's readers) is refused as one.
func openGateDirs(s *spool.Spool, writers int) (map[string]*spool.Subdir, error) {
	dirs := make(map[string]*spool.Subdir)
	closeAll := func() {
		for _, d := range dirs {
			d.Close()
		}
	}
	gate, err := s.OpenSubdir(spool.GateDir, 0o750)
	if err != nil {
		return nil, fmt.Errorf("vmgate: gate directory: %w", err)
	}
	fi, err := gate.Stat()
	gate.Close()
	if err != nil {
		return nil, fmt.Errorf("vmgate: gate directory: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && writers > 0 && st.Gid == uint32(writers) {
		return nil, fmt.Errorf("vmgate: the writers group (gid %d) is the group of %s, whose members read the spool: reading it must not let them run scripts (give the writers a group of their own)", writers, s.Path(spool.GateDir))
	}
	for _, d := range gateDirs {
		mode, gid := d.mode, -1
		if d.name == InDir && writers > 0 {
			mode, gid = 0o770, writers
		}
		sub, err := s.OpenSubdirGroup(spool.GateDir+"/"+d.name, mode, gid)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("vmgate: gate directory: %w", err)
		}
		dirs[d.name] = sub
	}
	return dirs, nil
}
