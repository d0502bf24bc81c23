// Command watchd relays the progress of a chat's run: `watchd follow`
// prints it until the run ends, `watchd serve` serves it over HTTP.
// Everything but flags, signals and logging lives in package watchd.
package main

import (
	"context"
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
	"github.com/vmspool/vmspool/internal/atomicfile"
	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/internal/ops"
	"github.com/vmspool/vmspool/spool"
	"github.com/vmspool/vmspool/watchd"
)

const name = "watchd"

const usage = `usage:
  watchd follow --chat C [--job J] [--json] [--timeout D] [--every D] [--poll D] [--spool DIR]
  watchd follow --url URL --chat C [--job J] [--json] [--timeout D] [--every D] [--token-file F]
  watchd serve [--listen ADDR] [--socket PATH] [--no-token] [--no-answer] [--poll D] [--spool DIR]

follow prints each new status of the chat's run, one line each, until the
run ends: exit 0 done, 1 failed or cancelled, 124 timed out. With --url it
reads watchd serve (unix:/PATH, or http://HOST:PORT with the token) instead
of the tree.
serve serves GET /chats/C, GET /chats/C/events (server-sent events),
GET / (a page of live runs) and POST /chats/C/answer (the page's answer
to a run's question, its one write) on the spool's unix socket (watchd/serve.sock)
and on loopback TCP (` + watchd.DefaultListen + `), which asks for the token in
watchd/token; it prints the page's address, with the token, once.
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
	dir := spool.Locate(c.spoolDir, os.Getenv, os.Getuid())
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
		chat, job          string
		remoteURL, tokFile string
		asJSON             bool
		timeout, ev        time.Duration
	)
	fs.StringVar(&chat, "chat", "", "the `chat` to follow (required)")
	fs.StringVar(&job, "job", "", "follow this `job` only, whatever its document's stamp")
	fs.BoolVar(&asJSON, "json", false, "print Open WebUI status events, the last with \"done\": true")
	cli.DurationVar(fs, &timeout, "timeout", 0, "give up after `D` with exit 124 (0: never)")
	cli.DurationVar(fs, &ev, "every", 0, "relay at most one status per `D`, the newest; questions and the end are never held back")
	fs.StringVar(&remoteURL, "url", "", "read watchd serve at `URL` (unix:/PATH, or http://HOST:PORT) instead of the tree")
	fs.StringVar(&tokFile, "token-file", "", "with an http --url: the token is in `FILE` (default $WATCHD_TOKEN, then the spool's watchd/token if readable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: watchd follow [--url URL] --chat C [--job J] [--json] [--timeout D] [--every D] [--poll D] [--spool DIR]")
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
	if remoteURL != "" {
		return followRemote(&c, remoteURL, tokFile, watchd.RemoteConfig{Chat: chat, Job: job, JSON: asJSON,
			Every: ev, Timeout: timeout, Began: began, Out: stdout})
	}
	if tokFile != "" {
		return cli.Usagef("follow: --token-file goes with --url")
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

// followRemote is watchd follow --url: the run as watchd serve streams it.
func followRemote(c *common, raw, tokFile string, cfg watchd.RemoteConfig) error {
	r, err := watchd.ParseRemote(raw)
	if err != nil {
		return cli.Usagef("follow: --url: %v", err)
	}
	if r.Token != "" {
		// A command line is every local user's to read (ps).
		return cli.Usagef("follow: --url carries a token, which any local user can read in ps: give it with --token-file F or $WATCHD_TOKEN")
	}
	if r.Socket == "" {
		if r.Token, err = remoteToken(c, tokFile); err != nil {
			return err
		}
	} else if tokFile != "" {
		return cli.Usagef("follow: a unix socket needs no token (--token-file)")
	}
	cfg.Remote = r
	sig := cli.CatchSignals()
	defer sig.Stop()
	end, err := watchd.FollowRemote(sig.Context(), cfg)
	switch {
	case errors.Is(err, watchd.ErrTimeout):
		return cli.Exit(cli.ExitTimeout)
	case err != nil && sig.First() != nil:
		return cli.Exit(sig.ExitCode())
	case errors.Is(err, watchd.ErrRefused):
		return cli.Usagef("follow: chat %s: %v", cfg.Chat, err)
	case err != nil:
		return fmt.Errorf("follow: chat %s: %w", cfg.Chat, err)
	case end.State == spool.Done:
		return nil
	}
	return cli.Exit(cli.ExitFail)
}

// remoteToken finds the token for an http --url: --token-file, else
// $WATCHD_TOKEN, else the spool's watchd/token if this user may read it;
// "" if none (watchd serve then says what it needs).
func remoteToken(c *common, tokFile string) (string, error) {
	if tokFile != "" {
		f, err := os.OpenFile(tokFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", cli.Usagef("follow: --token-file: %v", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return "", cli.Usagef("follow: --token-file %s: not a plain file", tokFile)
		}
		b, _ := io.ReadAll(io.LimitReader(f, spool.MaxTokenFile))
		tok := strings.TrimSpace(string(b))
		if err := spool.CheckToken(tok); err != nil {
			return "", cli.Usagef("follow: --token-file %s: %v", tokFile, err)
		}
		return tok, nil
	}
	if tok := strings.TrimSpace(os.Getenv("WATCHD_TOKEN")); tok != "" {
		if err := spool.CheckToken(tok); err != nil {
			return "", cli.Usagef("follow: $WATCHD_TOKEN: %v", err)
		}
		return tok, nil
	}
	s, err := spool.Open(spool.Locate(c.spoolDir, os.Getenv, os.Getuid()))
	if err != nil {
		return "", nil
	}
	defer s.Close()
	tok, _, err := s.ReadServeToken()
	if err != nil {
		return "", nil
	}
	return tok, nil
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

	base, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	go hub.Run(base)
	svc := ops.NewService(name, true, log)
	metrics := ops.NewWatchdMetrics(svc.Registry)
	srv := watchd.NewServer(watchd.ServerConfig{Spool: s, Hub: hub, Log: log, MaxSubscribers: f.maxSubs, WriteWait: f.wait, Metrics: metrics, NoAnswer: f.noAnswer})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Instrument("metrics", ops.MetricsHandler(svc.Registry)))
	mux.Handle("/", srv)
	// Only loopback names, IP addresses and the names of --allow-host:
	// a page elsewhere cannot read the chats by DNS rebinding.
	guarded := watchd.GuardHost(mux, strings.Split(f.allowHost, ","))

	var servers []*http.Server
	errc := make(chan error, 2)
	start := func(ln net.Listener, h http.Handler) {
		hs := srv.HTTPServer("", base)
		hs.Handler = h
		servers = append(servers, hs)
		go func() { errc <- hs.Serve(ln) }()
	}
	fields := map[string]any{"spool": s.RootPath, "watch": "inotify"}
	if f.poll > 0 {
		fields["watch"] = "poll " + f.poll.String()
	}

	// The unix socket: who may connect is who may read the spool.
	if f.socket != "none" {
		ln, err := listenSocket(s, f.socket)
		switch {
		case err != nil && (f.socket != "" || f.listen == "none" || errors.Is(err, watchd.ErrSocketInUse)):
			return cli.Failf(cli.ExitFail, "serve: %v", err)
		case err != nil:
			// The default socket, on a filesystem that has none (sshfs):
			// TCP still serves.
			log.WithError(err).Warn("no unix socket (--socket none to say so; another path with --socket PATH)")
		default:
			defer ln.Close()
			start(ln, guarded)
			fields["socket"] = ln.Path
		}
	}

	// TCP: the token, unless --no-token on loopback.
	var tcpAddr, pageURL string
	if f.listen != "none" {
		var tok string
		if !f.noToken {
			if tok, _, err = s.ServeToken(os.Geteuid()); err != nil {
				return cli.Failf(cli.ExitFail, "serve: %v", err)
			}
		}
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return cli.Failf(cli.ExitFail, "serve: %v (is another watchd running? pick another --listen)", err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		if f.noToken && !addr.IP.IsLoopback() {
			ln.Close()
			return cli.Usagef("serve: --no-token serves loopback only; %s is not (a token is needed beyond it)", addr)
		}
		if !addr.IP.IsLoopback() {
			log.WithField("addr", addr.String()).Warn("listening beyond loopback: the documents hold what people asked and answered; the token guards them, but travels in clear over HTTP")
		}
		h := guarded
		pageURL = "http://" + addr.String() + "/"
		if tok != "" {
			h = watchd.GuardHost((&watchd.Auth{Token: tok}).Handler(mux), strings.Split(f.allowHost, ","))
			pageURL += "?token=" + tok
			fields["token"] = s.Path(spool.ServeToken)
		} else {
			log.WithField("addr", addr.String()).Warn("--no-token: every local user may read every chat over TCP")
		}
		start(ln, h)
		tcpAddr = addr.String()
		fields["addr"] = tcpAddr
	}
	if len(servers) == 0 {
		return cli.Usagef("serve: nothing to listen on (--listen none and --socket none)")
	}
	if f.addrFile != "" {
		a := tcpAddr
		if a == "" {
			a = "unix:" + fields["socket"].(string)
		}
		if err := writeAddr(f.addrFile, a); err != nil {
			return cli.Failf(cli.ExitFail, "serve: --addr-file: %v", err)
		}
	}
	log.WithFields(fields).Info("listening")
	if pageURL != "" {
		// Once, as Jupyter does: the page's address, with the token that
		// opens it. stdout, not the log (the unit sends stdout nowhere).
		fmt.Fprintf(stdout, "watchd serve: the live page is at %s\n", pageURL)
	}
	// Ready once the address is known and written: a unit ordered after
	// this one may connect at once.
	sig.OnSignal(func(os.Signal) { svc.Stopping() }, nil)
	svc.Ready()
	svc.Watchdog(base, ops.DirHealth(s.RootPath))

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
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil {
			log.WithError(err).Warn("shutdown")
		}
	}
	log.Info("stopped")
	return nil
}

// listenSocket binds the unix socket: path, or the spool's watchd/serve.sock
// if path is empty; its mode and group are the spool's (spool.ServeAccess).
func listenSocket(s *spool.Spool, path string) (*watchd.UnixListener, error) {
	if path == "" {
		dir, a, err := s.OpenServeDir()
		if err != nil {
			return nil, err
		}
		ln, err := watchd.ListenUnix(dir, filepath.Base(spool.ServeSocket), s.Path(spool.ServeSocket), a.SocketMode(), a.Gid)
		if err != nil {
			dir.Close()
		}
		return ln, err
	}
	a, err := s.ServeAccess()
	if err != nil {
		return nil, err
	}
	dir, name, err := watchd.OpenSocketDir(path)
	if err != nil {
		return nil, err
	}
	ln, err := watchd.ListenUnix(dir, name, path, a.SocketMode(), a.Gid)
	if err != nil {
		dir.Close()
	}
	return ln, err
}

// serveFlags are watchd serve's command line.
type serveFlags struct {
	common
	listen, socket, addrFile, allowHost string
	noToken, noAnswer                   bool
	maxSubs                             int
	rescan, wait                        time.Duration
}

func parseServe(args []string, stdout io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f.register(fs, "info")
	fs.StringVar(&f.listen, "listen", watchd.DefaultListen, "listen on TCP `ADDR` (port 0: any free port; none: no TCP), asking for the token")
	fs.StringVar(&f.socket, "socket", "", "listen on the unix socket `PATH` (default the spool's watchd/serve.sock; none: no socket)")
	fs.BoolVar(&f.noToken, "no-token", false, "serve TCP on loopback without a token: every local user may then read every chat")
	fs.BoolVar(&f.noAnswer, "no-answer", false, "refuse answers from the page (POST /chats/C/answer): the server then writes nothing to the tree")
	fs.StringVar(&f.addrFile, "addr-file", "", "write the TCP address listened on (unix:PATH without TCP) to `FILE` once listening (for scripts that use port 0)")
	fs.StringVar(&f.allowHost, "allow-host", "", "also answer requests for these host `NAMES` (comma-separated; a reverse proxy's name; * for any). Loopback names and IP addresses are always answered")
	fs.IntVar(&f.maxSubs, "max-subscribers", 4096, "refuse event streams beyond `N` with 503")
	cli.DurationVar(fs, &f.rescan, "rescan", 5*time.Second, "inotify mode's safety-net re-read of followed chats every `D`")
	cli.DurationVar(fs, &f.wait, "write-wait", watchd.WriteWait, "drop an event stream whose client has not taken a write for `D`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: watchd serve [--listen ADDR] [--socket PATH] [--no-token] [--no-answer] [--poll D] [--spool DIR]")
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
	if f.listen == "" {
		f.listen = "none"
	}
	if f.socket != "" && f.socket != "none" && !filepath.IsAbs(f.socket) {
		return f, cli.Usagef("serve: --socket %s: want an absolute path (or none)", f.socket)
	}
	if f.noToken && f.listen == "none" {
		return f, cli.Usagef("serve: --no-token is about TCP, and --listen is none")
	}
	return f, nil
}

// writeAddr writes the address atomically, so a script polling for the
// file never reads half of it: the one atomic write (internal/atomicfile)
// in path's directory, whose temporary is new (O_EXCL, under a random
// name) and never a link (O_NOFOLLOW), so a link planted beside path
// cannot turn the write onto another file, whoever runs watchd. Mode
// 0644 whatever the umask; not fsync'd (it is rewritten at each start).
func writeAddr(path, addr string) error {
	return atomicfile.WriteFile(path, []byte(addr+"\n"), atomicfile.WithMode(0o644), atomicfile.NoSync())
}
