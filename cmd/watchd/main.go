// Command watchd relays the progress of a chat's run: `watchd follow`
// prints it until the run ends, `watchd serve` serves it over HTTP.
// Everything but flags, signals and logging lives in package watchd.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/watchd"
)

const name = "watchd"

const usage = `usage:
  watchd follow --chat C [--job J] [--json] [--timeout D] [--every D] [--poll D] [--spool DIR]
  watchd serve [--listen ADDR] [--poll D] [--spool DIR]

follow prints each new status of the chat's run, one line each, until the
run ends: exit 0 done, 1 failed or cancelled, 124 timed out.
serve serves GET /chats/C, GET /chats/C/events (server-sent events) and
GET / (a page of live runs), on loopback by default (` + watchd.DefaultListen + `).
Run "watchd follow -h" or "watchd serve -h" for each one's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, cli.Version(name))
		return cli.ExitOK
	case "follow":
		return cli.Report(stderr, name, follow(args[1:], stdout, stderr))
	case "serve":
		return cli.Report(stderr, name, serve(args[1:], stdout, stderr))
	}
	return cli.Report(stderr, name, cli.Usagef("unknown command %q; run \"watchd -h\" for the commands (follow, serve)", args[0]))
}

// common are the flags both commands take.
type common struct {
	spoolDir string
	poll     time.Duration
	logLevel string
	version  bool
}

func (c *common) register(fs *flag.FlagSet, level string) {
	fs.StringVar(&c.spoolDir, "spool", "", "the spool `DIR` (default $SPOOL_DIR, $JOBS_DIR, then the per-user default)")
	cli.DurationVar(fs, &c.poll, "poll", 0, "poll every `D` instead of using inotify (NFS, FUSE, shared trees)")
	fs.StringVar(&c.logLevel, "log-level", level, "log `level`: debug, info, warn, error")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
}

// parse parses a subcommand's flags and answers -h and --version itself
// (then it returns cli.ErrHelp).
func parse(fs *flag.FlagSet, c *common, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return cli.ErrHelp
		}
		return cli.Usagef("%s: %v; run \"watchd %s -h\"", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected argument %q; run \"watchd %s -h\"", fs.Name(), fs.Arg(0), fs.Name())
	}
	if c.version {
		fmt.Fprintln(stdout, cli.Version(name))
		return cli.ErrHelp
	}
	return nil
}

// logAndOpen makes the logger at c's level and opens the spool.
func logAndOpen(c *common, stderr io.Writer) (*logrus.Logger, *spool.Spool, error) {
	log, err := ops.Logger(stderr, c.logLevel)
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	dir := spool.ResolveDir(c.spoolDir, os.Getenv, os.Getuid())
	s, err := spool.Open(dir)
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	return log, s, nil
}

func follow(args []string, stdout, stderr io.Writer) error {
	// The start, stamped before anything else: a document stamped before it
	// belongs to an earlier run (invariant 7).
	began := time.Now()
	fs := flag.NewFlagSet("follow", flag.ContinueOnError)
	var c common
	c.register(fs, "warn")
	var (
		chat, job   string
		asJSON      bool
		timeout, ev time.Duration
	)
	fs.StringVar(&chat, "chat", "", "the `chat` to follow (required)")
	fs.StringVar(&job, "job", "", "follow this `job` only, whatever its document's stamp")
	fs.BoolVar(&asJSON, "json", false, "print Open WebUI status events, the last with \"done\": true")
	cli.DurationVar(fs, &timeout, "timeout", 0, "give up after `D` with exit 124 (0: never)")
	cli.DurationVar(fs, &ev, "every", 0, "relay at most one status per `D`, the newest; questions and the end are never held back")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: watchd follow --chat C [--job J] [--json] [--timeout D] [--every D] [--poll D] [--spool DIR]")
		fs.PrintDefaults()
	}
	if err := parse(fs, &c, args, stdout); err != nil {
		return err
	}
	if chat == "" {
		return cli.Usagef("follow: --chat is required; run \"watchd follow -h\"")
	}
	if err := spool.CheckChatID(chat); err != nil {
		return cli.Usagef("%v", err)
	}
	if job != "" {
		if err := spool.CheckJobID(job); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if timeout < 0 || ev < 0 || c.poll < 0 {
		return cli.Usagef("follow: durations must not be negative")
	}
	// Signals are caught before the spool is opened: a stop that comes
	// while it opens still ends the follower with 128+n, never the
	// default action's bare kill.
	sig := cli.CatchSignals()
	defer sig.Stop()
	log, s, err := logAndOpen(&c, stderr)
	if err != nil {
		return err
	}
	defer s.Close()

	ctx := sig.Context()
	end, err := watchd.Follow(ctx, watchd.FollowConfig{
		Spool: s, Chat: chat, Job: job, Began: began,
		JSON: asJSON, Every: ev, Timeout: timeout, Poll: c.poll,
		Out: stdout, Log: log.WithField("chat", chat),
	})
	switch {
	case errors.Is(err, watchd.ErrTimeout):
		return cli.Exit(cli.ExitTimeout)
	case err != nil && sig.First() != nil:
		// Stopped by a signal: the conventional 128+n, so that a caller
		// never reads it as the run's outcome.
		return cli.Exit(sig.ExitCode())
	case err != nil:
		return fmt.Errorf("follow: chat %s: %w", chat, err)
	case end.State == spool.Done:
		return nil
	}
	return cli.Exit(cli.ExitFail)
}

func serve(args []string, stdout, stderr io.Writer) error {
	// Signals are caught from the very start, well before READY=1: a stop
	// that comes during start-up must find the handler (and is acted on
	// once listening), not the default action.
	sig := cli.CatchSignals()
	defer sig.Stop()
	f, err := parseServe(args, stdout)
	if err != nil {
		return err
	}
	log, s, err := logAndOpen(&f.common, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	hub, err := watchd.NewHub(s, watchd.HubConfig{Poll: f.poll, Rescan: f.rescan, Log: log})
	if err != nil {
		return cli.Failf(cli.ExitFail, "serve: %v", err)
	}
	defer hub.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return cli.Failf(cli.ExitFail, "serve: %v (is another watchd running? pick another --listen)", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		log.WithField("addr", addr.String()).Warn("listening beyond loopback: the documents hold what people asked and answered")
	}

	base, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	go hub.Run(base)
	svc := ops.NewService(name, true, log)
	metrics := ops.NewWatchdMetrics(svc.Registry)
	srv := watchd.NewServer(watchd.ServerConfig{Spool: s, Hub: hub, Log: log, MaxSubscribers: f.maxSubs, WriteWait: f.wait, Metrics: metrics})
	hs := srv.HTTPServer(f.listen, base)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Instrument("metrics", ops.MetricsHandler(svc.Registry)))
	mux.Handle("/", srv)
	// Only loopback names, IP addresses and the names of --allow-host:
	// a page elsewhere cannot read the chats by DNS rebinding.
	hs.Handler = watchd.GuardHost(mux, strings.Split(f.allowHost, ","))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if f.addrFile != "" {
		if err := writeAddr(f.addrFile, addr.String()); err != nil {
			return cli.Failf(cli.ExitFail, "serve: --addr-file: %v", err)
		}
	}
	mode := "inotify"
	if f.poll > 0 {
		mode = "poll " + f.poll.String()
	}
	log.WithFields(map[string]any{"addr": addr.String(), "spool": s.Dir, "watch": mode}).Info("listening")
	// Ready once the address is known and written: a unit ordered after
	// this one may connect at once.
	sig.OnSignal(func(os.Signal) { svc.Stopping() }, nil)
	svc.Ready()
	svc.Watchdog(base, ops.DirHealth(s.Dir))

	select {
	case <-sig.Context().Done():
		log.WithField("signal", sig.First().String()).Info("shutting down")
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	// End the streams first: Shutdown waits for handlers, and a stream's
	// handler lasts as long as its run.
	stopStreams()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		log.WithError(err).Warn("shutdown")
	}
	log.Info("stopped")
	return nil
}

// serveFlags are watchd serve's command line.
type serveFlags struct {
	common
	listen, addrFile, allowHost string
	maxSubs                     int
	rescan, wait                time.Duration
}

func parseServe(args []string, stdout io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f.register(fs, "info")
	fs.StringVar(&f.listen, "listen", watchd.DefaultListen, "listen on `ADDR` (port 0: any free port)")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the address listened on to `FILE` once listening (for scripts that use port 0)")
	fs.StringVar(&f.allowHost, "allow-host", "", "also answer requests for these host `NAMES` (comma-separated; a reverse proxy's name; * for any). Loopback names and IP addresses are always answered")
	fs.IntVar(&f.maxSubs, "max-subscribers", 4096, "refuse event streams beyond `N` with 503")
	cli.DurationVar(fs, &f.rescan, "rescan", 5*time.Second, "inotify mode's safety-net re-read of followed chats every `D`")
	cli.DurationVar(fs, &f.wait, "write-wait", watchd.WriteWait, "drop an event stream whose client has not taken a write for `D`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: watchd serve [--listen ADDR] [--poll D] [--spool DIR]")
		fs.PrintDefaults()
	}
	if err := parse(fs, &f.common, args, stdout); err != nil {
		return f, err
	}
	if f.poll < 0 || f.rescan < 0 || f.maxSubs < 0 {
		return f, cli.Usagef("serve: durations and counts must not be negative")
	}
	if f.wait <= 0 {
		return f, cli.Usagef("serve: --write-wait must be positive")
	}
	return f, nil
}

// writeAddr writes the address atomically, so a script polling for the
// file never reads half of it. The temporary is new (O_EXCL, under a random
// name) and never a link (O_NOFOLLOW): a link planted beside path cannot
// turn the write onto another file, whoever runs watchd.
func writeAddr(path, addr string) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(addr + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
