package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var submitCmd = cli.Command{
	Name: "submit",
	Usage: `--chat C [--timeout D] [--attempts N] [--cwd DIR] [--env K=V]... [--id ID] -- ARGV...
--chat C [flags] --script FILE|-
--spec FILE|-
--batch FILE|-`,
	Short: "Queue a job that runs ARGV or a script, and print its id.",
	Long: `Writes <job>.json, removes progress/<chat> and chats/<chat>/answer.json,
then creates <job>.ready (docs/contract.md, invariant 6). Prints the job
id (a ULID unless --id). Nothing is written on bad input. Below the
spool's free-space floor (64 MiB, 1 % or 1,000 inodes free;
$SPOOL_MIN_FREE, $SPOOL_MIN_FREE_PERCENT, $SPOOL_MIN_FREE_INODES, 0 for
off) the job is refused.

--batch queues one spec document a line (JSON, as --spec takes; blank
lines are skipped) in one process, and prints one id a line: the specs
are made durable together, then the markers (docs/spool-format.md). A bad
line stops it with its number, and nothing of the batch is queued.`,
	Flags: func(fs *flag.FlagSet) {
		fs.String("chat", "", "the chat `C` the job runs for (required)")
		cli.Duration(fs, "timeout", 0, "kill the job after `D` (45m, 2h, 7d, or seconds)")
		fs.Int("attempts", 0, "how many times the job may be started in all (default 1)")
		fs.String("cwd", "", "the job's working `DIR` (relative to here)")
		fs.Var(envList{}, "env", "set `K=V` in the job's environment (repeatable)")
		fs.String("id", "", "the job's `ID` (default: a fresh ULID)")
		fs.String("script", "", "run the script in `FILE` (- for stdin) through the gate")
		fs.String("spec", "", "queue the spec document in `FILE` (- for stdin)")
		fs.String("batch", "", "queue the spec documents in `FILE` (- for stdin), one a line")
	},
	Run: submit,
}

// envList collects repeated --env K=V.
type envList map[string]string

func (e envList) String() string { return "" }
func (e envList) Get() any       { return map[string]string(e) }
func (e envList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("--env %q: want NAME=VALUE", s)
	}
	e[k] = v
	return nil
}

func submit(c *cli.Call) error {
	chat, cwd, id := c.String("chat"), c.String("cwd"), c.String("id")
	script, specFile, batch := c.String("script"), c.String("spec"), c.String("batch")
	attempts := c.Int("attempts")
	env := c.Flag("env").(envList)
	argv := c.Args
	bad := func(format string, args ...any) error { return cli.Usagef(format, args...) }
	if batch != "" {
		if chat != "" || script != "" || specFile != "" || len(argv) > 0 || len(env) > 0 || cwd != "" || c.IsSet("timeout") || attempts != 0 || id != "" {
			return c.Usagef("--batch takes every job from its lines; give no other job flags or ARGV")
		}
		return submitBatch(c, batch)
	}
	var sp *spool.Spec
	var err error
	if specFile != "" {
		if chat != "" || script != "" || len(argv) > 0 || len(env) > 0 || cwd != "" || c.IsSet("timeout") || attempts != 0 {
			return c.Usagef("--spec takes the whole job from its document; give no other job flags or ARGV")
		}
		sp, err = specFromFile(c, specFile, id)
	} else {
		sp, err = specFromFlags(c, &spool.Spec{ID: id, Chat: chat, Cwd: cwd, Timeout: spool.Duration(c.Duration("timeout")), Attempts: attempts}, env, script, argv)
	}
	if err != nil {
		return err
	}
	// Check everything before the spool is touched.
	if sp.ID != "" {
		if err := spool.CheckJobID(sp.ID); err != nil {
			return bad("%v", err)
		}
	}
	if err := spool.CheckChatID(sp.Chat); err != nil {
		return bad("%v", err)
	}
	if err := sp.Validate(); err != nil {
		return bad("%v", err)
	}
	s, err := openToSubmit(c)
	if err != nil {
		return err
	}
	defer s.Close()
	job, err := s.Submit(sp)
	if err != nil {
		// Submit leaves nothing behind; a spool that cannot be written
		// (read-only, full) is the caller's input to fix.
		if errors.Is(err, fs.ErrPermission) {
			return bad("spool %s: cannot write it (%v): %s", s.RootPath, err, s.WriteAdvice())
		}
		return bad("%v", err)
	}
	fmt.Fprintln(c.Stdout, job)
	return nil
}

// specFromFile reads the spec document of --spec (- for stdin); id, if
// given, must agree with the document's own.
func specFromFile(c *cli.Call, file, id string) (*spool.Spec, error) {
	b, err := readInput(c, file)
	if err != nil {
		return nil, cli.Usagef("spec %s: %v", file, err)
	}
	sp, err := spool.ParseSpec(b)
	if err != nil {
		return nil, cli.Usagef("spec %s: %v", file, err)
	}
	if id != "" {
		if sp.ID != "" && sp.ID != id {
			return nil, cli.Usagef("spec %s: its \"id\" is %q, not --id %q", file, sp.ID, id)
		}
		sp.ID = id
	}
	return sp, nil
}

// specFromFlags completes sp from the command line: the environment, and
// what runs, ARGV or the script in a file (- for stdin).
func specFromFlags(c *cli.Call, sp *spool.Spec, env envList, script string, argv []string) (*spool.Spec, error) {
	if sp.Chat == "" {
		return nil, c.Usagef("--chat is required")
	}
	// A relative --cwd means the caller's, not the daemon's.
	if sp.Cwd != "" && !filepath.IsAbs(sp.Cwd) {
		abs, err := filepath.Abs(sp.Cwd)
		if err != nil {
			return nil, cli.Usagef("--cwd %s: %v", sp.Cwd, err)
		}
		sp.Cwd = abs
	}
	if len(env) > 0 {
		sp.Env = env
	}
	switch {
	case script != "" && len(argv) > 0:
		return nil, c.Usagef("give ARGV or --script, not both")
	case script != "":
		b, err := readInput(c, script)
		if err != nil {
			return nil, cli.Usagef("script %s: %v", script, err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, cli.Usagef("script %s is empty: nothing to run", script)
		}
		s := string(b)
		sp.Script = &s
	case len(argv) == 0:
		return nil, c.Usagef("nothing to run: give ARGV after -- or --script FILE")
	default:
		sp.Argv = argv
	}
	return sp, nil
}

// openToSubmit opens the spool with the free-space floor of the
// environment: below it a submit is refused, as spoold stops claiming, so
// that a runaway job filling the disk does not take the queue with it.
func openToSubmit(c *cli.Call) (*spool.Spool, error) {
	floor, err := spool.FloorFromEnv(c.Getenv)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	s, err := open(c)
	if err != nil {
		return nil, err
	}
	s.Floor = floor
	return s, nil
}

// submitBatch queues the specs of name, one a line: every line is parsed
// and checked first, so that a bad one queues nothing.
func submitBatch(c *cli.Call, name string) error {
	bad := func(format string, args ...any) error { return cli.Usagef(format, args...) }
	r, err := openInput(c, name)
	if err != nil {
		return bad("batch %s: %v", name, err)
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), spool.MaxDocument+1)
	var specs []*spool.Spec
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		sp, err := spool.ParseSpec(line)
		if err == nil && sp.ID != "" {
			err = spool.CheckJobID(sp.ID)
		}
		if err != nil {
			return bad("batch %s: line %d: %v; nothing was queued", name, n, err)
		}
		specs = append(specs, sp)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return bad("batch %s: line %d: larger than %d bytes; nothing was queued", name, n+1, spool.MaxDocument)
		}
		return bad("batch %s: %v; nothing was queued", name, err)
	}
	if len(specs) == 0 {
		return bad("batch %s: no spec in it", name)
	}
	s, err := openToSubmit(c)
	if err != nil {
		return err
	}
	defer s.Close()
	ids, err := s.SubmitBatch(specs)
	w := bufio.NewWriter(c.Stdout)
	for _, id := range ids {
		w.WriteString(id + "\n")
	}
	w.Flush()
	if err != nil {
		if len(ids) > 0 {
			// Some are queued and printed; the rest are not.
			return cli.Failf(cli.ExitFail, "batch %s: %v; the %d ids printed were queued, the rest not", name, err, len(ids))
		}
		return bad("batch %s: %v; nothing was queued", name, err)
	}
	return nil
}

// readInput reads a whole file, or stdin for "-".
func readInput(c *cli.Call, name string) ([]byte, error) {
	r, err := openInput(c, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, spool.MaxDocument+1))
	if err == nil && len(b) > spool.MaxDocument {
		// Stdin too: cut at the limit, it would queue a part of a script.
		err = fmt.Errorf("larger than %d bytes", spool.MaxDocument)
	}
	return b, err
}

// openInput opens a plain file to read, or stdin for "-".
func openInput(c *cli.Call, name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(c.Stdin), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
