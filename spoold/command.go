package spoold

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// This file builds a job's process: its argv or the system's bash, its
// clean environment, its cwd, stdin and process group. The attempt's
// lifecycle (run.go) starts and ends what this builds.

// systemBash is the absolute path of the bash that runs script jobs: the
// first of the system's usual places that holds an executable file.
var systemBash = sync.OnceValues(func() (string, error) {
	for _, p := range []string{"/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("cannot run the script: no bash in /bin, /usr/bin or /usr/local/bin")
})

// command builds the job's process: argv executed directly (never through
// a shell), a script read by bash from a pipe; a clean environment; its
// own session and process group (the job's pid is both).
func (r *run) command() (*exec.Cmd, error) {
	d, sp := r.d, r.sp
	env, dropped := r.env()
	if len(dropped) > 0 {
		// Said before anything runs: the script sees spoold's values
		// of these, or none, and its history says why.
		text := "env: " + strings.Join(dropped, ", ") + " not passed to the script (a script job's env is an allowlist: docs/spoold.md)"
		r.event(spool.Event{Type: spool.EventWorker, Text: text})
		r.log.WithField("names", strings.Join(dropped, ",")).Warn("script job's env: names left out")
	}
	dir := sp.Cwd
	if dir == "" {
		dir = d.cfg.WorkDir
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(d.cfg.WorkDir, dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("cwd %s: no such directory", dir)
	}
	var argv []string
	var path string
	if sp.Script != nil {
		// bash reads the script from the pipe on fd 5 (never a file: the
		// script is written nowhere), and the job's stdin stays /dev/null.
		// It is found by absolute path, never by the job's PATH, which the
		// spec may set: the shell that runs a gated script is the system's.
		bash, err := systemBash()
		if err != nil {
			return nil, err
		}
		argv, path = []string{"bash", "/dev/fd/5"}, bash
	} else {
		argv = sp.Argv
		p, err := lookPath(argv[0], getenv(env, "PATH"), dir)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if r.timeout = time.Duration(sp.Timeout); d.cfg.MaxTimeout > 0 && (r.timeout == 0 || r.timeout > d.cfg.MaxTimeout) {
		r.timeout = d.cfg.MaxTimeout
	}
	stdin, err := d.devNull.get()
	if err != nil {
		return nil, err
	}
	return &exec.Cmd{Path: path, Args: argv, Env: env, Dir: dir, Stdin: stdin,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}, nil
}

// devNull is /dev/null, opened once for reading and given to every job as
// its stdin (os/exec would open and close it for each: seven system calls
// a job). Reading it has no offset to share; it is never closed.
type devNull struct {
	once sync.Once
	f    *os.File
	err  error
}

func (n *devNull) get() (*os.File, error) {
	n.once.Do(func() { n.f, n.err = os.Open(os.DevNull) })
	if n.err != nil {
		return nil, fmt.Errorf("cannot open %s for the job's stdin: %v", os.DevNull, n.err)
	}
	return n.f, nil
}

// env is the job's environment: the daemon's base (PATH, HOME, LANG...),
// then the spec's env, then the SPOOL_* variables, which nothing overrides.
// A script job's spec sets only what the allowlist allows (scriptenv.go);
// the names it left out are returned, sorted.
func (r *run) env() (env, dropped []string) {
	m := make(map[string]string)
	for _, kv := range r.d.cfg.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	for k, v := range r.sp.Env {
		if r.sp.Script != nil && !r.d.scriptEnv.Allows(k, v) {
			dropped = append(dropped, k)
			continue
		}
		m[k] = v
	}
	m["SPOOL_DIR"] = r.d.root
	m["SPOOL_JOB"] = r.job
	m["SPOOL_CHAT"] = r.sp.Chat
	m["SPOOL_EVENTS"] = filepath.Join(r.d.root, r.job+spool.ExtEvents)
	m["SPOOL_ATTEMPT"] = strconv.Itoa(r.lease.Attempt)
	m["SPOOL_WORKER"] = r.d.cfg.Worker
	env = make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	sort.Strings(dropped)
	return env, dropped
}

func getenv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds argv[0] the way execvp would with the job's own PATH (not
// spoold's), relative entries and names with a slash taken relative to the
// job's cwd.
func lookPath(name, path, cwd string) (string, error) {
	exe := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if !exe(p) {
			return "", fmt.Errorf("argv[0] %q: no such executable file (in cwd %s)", name, cwd)
		}
		return p, nil
	}
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if exe(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("argv[0] %q: executable file not found in the job's PATH (%s)", name, path)
}
