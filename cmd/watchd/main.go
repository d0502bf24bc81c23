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
	"net/url"
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

var prog = &cli.Program{
	Name:  "watchd",
	Usage: "COMMAND [flags]",
	Short: "Relays the progress of a chat's run, to a terminal or over HTTP.",
	Long: `follow prints the run's statuses until it ends, from the tree or from
watchd serve. serve serves every chat's progress, its events as they
come and a page of live runs, on the spool's unix socket and on loopback
TCP (` + watchd.DefaultListen + `), which asks for the token in watchd/token.`,
	Common: func(fs *flag.FlagSet) {
		fs.String("spool", "", "the spool `DIR` (default $SPOOL_DIR, $JOBS_DIR, then as spool -h says)")
		cli.Duration(fs, "poll", 0, "poll every `D` instead of using inotify (NFS, FUSE, shared trees)")
	},
}

func init() {
	prog.Register(followCmd)
	prog.Register(serveCmd)
}

func main() { prog.Main() }

func logLevel(fs *flag.FlagSet, level string) {
	fs.String("log-level", level, "log `level`: debug, info, warn, error")
}

// logAndOpen makes the logger at c's level and opens the spool.
func logAndOpen(c *cli.Call) (*logrus.Logger, *spool.Spool, error) {
	log, err := ops.Logger(c.Stderr, c.String("log-level"))
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	dir := spool.Locate(c.String("spool"), c.Getenv, os.Getuid())
	s, err := spool.Open(dir)
	if err != nil {
		return nil, nil, cli.Usagef("%v", err)
	}
	return log, s, nil
}

var followCmd = cli.Command{
	Name: "follow",
	Usage: `--chat C [--job J] [--json] [--timeout D] [--every D] [--poll D] [--spool DIR]
--url URL --chat C [--job J] [--json] [--timeout D] [--every D] [--token-file F]`,
	Short: "Print each new status of the chat's run, one line each, until the run ends.",
	Long: `Exit 0 done, 1 failed or cancelled, 124 timed out. With --url it reads
watchd serve (unix:/PATH, or http://HOST:PORT with the token) instead of
the tree.`,
	Flags: func(fs *flag.FlagSet) {
		logLevel(fs, "warn")
		fs.String("chat", "", "the `chat` to follow (required)")
		fs.String("job", "", "follow this `job` only, whatever its document's stamp")
		fs.Bool("json", false, "print Open WebUI status events, the last with \"done\": true")
		cli.Duration(fs, "timeout", 0, "give up after `D` with exit 124 (0: never)")
		cli.Duration(fs, "every", 0, "relay at most one status per `D`, the newest; questions and the end are never held back")
		fs.String("url", "", "read watchd serve at `URL` (unix:/PATH, or http://HOST:PORT) instead of the tree")
		fs.String("token-file", "", "with an http --url: the token is in `FILE` (default $WATCHD_TOKEN, then the spool's watchd/token if readable)")
	},
	Run: follow,
}

func follow(c *cli.Call) error {
	// The start, stamped before anything else: a document stamped before it
	// belongs to an earlier run (invariant 7).
	began := time.Now()
	chat, job, asJSON := c.String("chat"), c.String("job"), c.Bool("json")
	remoteURL, tokFile := c.String("url"), c.String("token-file")
	timeout, ev, poll := c.Duration("timeout"), c.Duration("every"), c.Duration("poll")
	stdout := c.Stdout
	if err := c.NoOperands(); err != nil {
		return err
	}
	if chat == "" {
		return c.Usagef("--chat is required")
	}
	if err := spool.CheckChatID(chat); err != nil {
		return cli.Usagef("%v", err)
	}
	if job != "" {
		if err := spool.CheckJobID(job); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if remoteURL != "" {
		return followRemote(c, remoteURL, tokFile, watchd.RemoteConfig{Chat: chat, Job: job, JSON: asJSON,
			Every: ev, Timeout: timeout, Began: began, Out: stdout})
	}
	if tokFile != "" {
		return c.Usagef("--token-file goes with --url")
	}
	// Signals are caught before the spool is opened: a stop that comes
	// while it opens still ends the follower with 128+n, never the
	// default action's bare kill.
	sig := cli.CatchSignals()
	defer sig.Stop()
	log, s, err := logAndOpen(c)
	if err != nil {
		return err
	}
	defer s.Close()

	// Never wait on nothing without a word: a job the spool does not
	// hold is waited for a moment (a follow started just before its
	// submit), then refused; a chat whose last run ended is said, to a
	// person (--json's reader has the structure, and no use for a note).
	if job != "" {
		wait := noJobWait
		if timeout > 0 {
			wait = min(wait, timeout)
		}
		err := watchd.CheckJob(s, chat, job)
		for errors.Is(err, spool.ErrNoJob) && time.Since(began) < wait {
			time.Sleep(100 * time.Millisecond) // the pace of the look
			err = watchd.CheckJob(s, chat, job)
		}
		if err != nil {
			return err
		}
	} else if end := watchd.EndedRun(s, chat, began); end != nil && !asJSON {
		fmt.Fprintf(c.Stderr, "watchd follow: chat %s's last run, job %s, ended (%s) before this follow began, and no job of the chat is queued: waiting for its next run (--job %s shows the one that ended)\n",
			chat, spool.Printable(end.Job), end.State, spool.Printable(end.Job))
	}
	ctx := sig.Context()
	end, err := watchd.Follow(ctx, watchd.FollowConfig{
		Spool: s, Chat: chat, Job: job, Began: began,
		JSON: asJSON, Every: ev, Timeout: timeout, Poll: poll,
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
		return fmt.Errorf("chat %s: %w", chat, err)
	case end.State == spool.Done:
		return nil
	}
	return cli.Exit(cli.ExitFail)
}

// followRemote is watchd follow --url: the run as watchd serve streams it.
func followRemote(c *cli.Call, raw, tokFile string, cfg watchd.RemoteConfig) error {
	r, err := watchd.ParseRemote(raw)
	if err != nil {
		return c.Usagef("--url: %v", err)
	}
	if r.Token != "" {
		// A command line is every local user's to read (ps).
		return cli.Usagef("--url carries a token, which any local user can read in ps: give it with --token-file F or $WATCHD_TOKEN")
	}
	if r.Socket == "" {
		if r.Token, err = remoteToken(c, tokFile); err != nil {
			return err
		}
	} else if tokFile != "" {
		return c.Usagef("a unix socket needs no token (--token-file)")
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
		return cli.Usagef("chat %s: %v", cfg.Chat, err)
	case err != nil:
		return fmt.Errorf("chat %s: %w", cfg.Chat, err)
	case end.State == spool.Done:
		return nil
	}
	return cli.Exit(cli.ExitFail)
}

// remoteToken finds the token for an http --url: --token-file, else
// $WATCHD_TOKEN, else the spool's watchd/token if this user may read it;
// "" if none (watchd serve then says what it needs).
func remoteToken(c *cli.Call, tokFile string) (string, error) {
	if tokFile != "" {
		f, err := os.OpenFile(tokFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", cli.Usagef("--token-file: %v", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return "", cli.Usagef("--token-file %s: not a plain file", tokFile)
		}
		b, _ := io.ReadAll(io.LimitReader(f, spool.MaxTokenFile))
		tok := strings.TrimSpace(string(b))
		if err := spool.CheckToken(tok); err != nil {
			return "", cli.Usagef("--token-file %s: %v", tokFile, err)
		}
		return tok, nil
	}
	if tok := strings.TrimSpace(c.Getenv("WATCHD_TOKEN")); tok != "" {
		if err := spool.CheckToken(tok); err != nil {
			return "", cli.Usagef("$WATCHD_TOKEN: %v", err)
		}
		return tok, nil
	}
	s, err := spool.Open(spool.Locate(c.String("spool"), c.Getenv, os.Getuid()))
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

var serveCmd = cli.Command{
	Name:  "serve",
	Usage: "[--listen ADDR] [--socket PATH] [--no-token] [--no-answer] [--poll D] [--spool DIR]",
	Short: "Serve the chats' progress and a page of live runs over HTTP.",
	Long: `GET /chats/C the current document, GET /chats/C/events server-sent
events, GET / a page of live runs and POST /chats/C/answer the page's
answer to a run's question (its one write), on the spool's unix socket
(watchd/serve.sock) and on loopback TCP, which asks for the token in
watchd/token. It prints the page's address, with the token, once.`,
	Flags: func(fs *flag.FlagSet) {
		logLevel(fs, "info")
		fs.String("listen", watchd.DefaultListen, "listen on TCP `ADDR` (port 0: any free port; none: no TCP), asking for the token")
		fs.String("socket", "", "listen on the unix socket `PATH` (default the spool's watchd/serve.sock; none: no socket)")
		fs.Bool("no-token", false, "serve TCP on loopback without a token: every local user may then read every chat")
		fs.Bool("no-answer", false, "refuse answers from the page (POST /chats/C/answer): the server then writes nothing to the tree")
		fs.String("addr-file", "", "write the TCP address listened on (unix:PATH without TCP) to `FILE` once listening (for scripts that use port 0)")
		fs.String("allow-host", "", "also answer requests for these host `NAMES` (comma-separated; a reverse proxy's name; * for any). Loopback names and IP addresses are always answered")
		fs.Int("max-subscribers", 4096, "refuse event streams beyond `N` with 503")
		fs.Int("max-conns", 0, "keep at most `N` connections open on each listener, closing any more at once (default the open-files limit less 128)")
		fs.Int("max-conns-per-addr", 512, "keep at most `N` TCP connections open from one client address beyond loopback (loopback clients share --max-conns)")
		cli.Duration(fs, "rescan", 5*time.Second, "inotify mode's safety-net re-read of followed chats every `D`")
		cli.Duration(fs, "write-wait", watchd.WriteWait, "drop an event stream whose client has not taken a write for `D`")
	},
	Run: serve,
}

func serve(c *cli.Call) error {
	// Signals are caught from the very start, well before READY=1: a stop
	// that comes during start-up must find the handler (and is acted on
	// once listening), not the default action.
	sig := cli.CatchSignals()
	defer sig.Stop()
	stdout := c.Stdout
	f, err := parseServe(c)
	if err != nil {
		return err
	}
	log, s, err := logAndOpen(c)
	if err != nil {
		return err
	}
	defer s.Close()
	hub, err := watchd.NewHub(s, watchd.HubConfig{Poll: f.poll, Rescan: f.rescan, Log: log})
	if err != nil {
		return cli.Failf(cli.ExitFail, "%v", err)
	}
	defer hub.Close()

	base, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	go hub.Run(base)
	svc := ops.NewService(prog.Name, true, log)
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
		ln = &watchd.LimitedListener{Listener: ln, Total: f.maxConns, PerAddr: f.maxConnsPerAddr, SharedLoopback: true,
			Refused: func(which string) {
				log.WithFields(logrus.Fields{"cap": which, "max_conns": f.maxConns, "max_conns_per_addr": f.maxConnsPerAddr,
					"addr": ln.Addr().String()}).Warn("connections over the cap closed at once")
			}}
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
			return cli.Failf(cli.ExitFail, "%v", err)
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
				return cli.Failf(cli.ExitFail, "%v", err)
			}
		}
		ln, err := net.Listen("tcp", f.listen)
		if err != nil {
			return cli.Failf(cli.ExitFail, "%v (is another watchd running? pick another --listen)", err)
		}
		addr := ln.Addr().(*net.TCPAddr)
		if f.noToken && !addr.IP.IsLoopback() {
			ln.Close()
			return c.Usagef("--no-token serves loopback only; %s is not (a token is needed beyond it)", addr)
		}
		if !addr.IP.IsLoopback() {
			log.WithField("addr", addr.String()).Warn("listening beyond loopback: the documents hold what people asked and answered; the token guards them, but travels in clear over HTTP")
		}
		h := guarded
		pageURL = "http://" + addr.String() + "/"
		if tok != "" {
			h = watchd.GuardHost((&watchd.Auth{Token: tok}).Handler(mux), strings.Split(f.allowHost, ","))
			pageURL += "#token=" + url.QueryEscape(tok)
			fields["token"] = s.Path(spool.ServeToken)
		} else {
			log.WithField("addr", addr.String()).Warn("--no-token: every local user may read every chat over TCP")
		}
		start(ln, h)
		tcpAddr = addr.String()
		fields["addr"] = tcpAddr
	}
	if len(servers) == 0 {
		return c.Usagef("nothing to listen on (--listen none and --socket none)")
	}
	if f.addrFile != "" {
		a := tcpAddr
		if a == "" {
			a = "unix:" + fields["socket"].(string)
		}
		if err := writeAddr(f.addrFile, a); err != nil {
			return cli.Failf(cli.ExitFail, "--addr-file: %v", err)
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
		return err
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

// defaultMaxConns is --max-conns' default: the open-files limit less 128
// descriptors kept for the spool's documents, the watch and the log. It
// is a bound on descriptors, not on clients: a lower one would refuse a
// token's holder while idle connections hold the rest.
func defaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<20 {
		return 1 << 20
	}
	return max(int(lim.Cur)-128, 16)
}

// noJobWait is how long `watchd follow --job J` waits for a J the spool
// does not hold yet before it refuses it: a follow may be started just
// before the submit it follows.
const noJobWait = 5 * time.Second

// serveFlags are watchd serve's command line.
type serveFlags struct {
	listen, socket, addrFile, allowHost string
	noToken, noAnswer                   bool
	maxSubs, maxConns, maxConnsPerAddr  int
	poll, rescan, wait                  time.Duration
}

func parseServe(c *cli.Call) (serveFlags, error) {
	f := serveFlags{
		listen: c.String("listen"), socket: c.String("socket"), addrFile: c.String("addr-file"), allowHost: c.String("allow-host"),
		noToken: c.Bool("no-token"), noAnswer: c.Bool("no-answer"), maxSubs: c.Int("max-subscribers"),
		maxConns: c.Int("max-conns"), maxConnsPerAddr: c.Int("max-conns-per-addr"),
		poll: c.Duration("poll"), rescan: c.Duration("rescan"), wait: c.Duration("write-wait"),
	}
	if err := c.NoOperands(); err != nil {
		return f, err
	}
	if f.maxSubs < 0 {
		return f, c.Usagef("--max-subscribers must not be negative")
	}
	if f.maxConns < 0 || f.maxConnsPerAddr < 0 {
		return f, c.Usagef("--max-conns and --max-conns-per-addr must not be negative")
	}
	if f.maxConns == 0 {
		f.maxConns = defaultMaxConns()
	}
	if f.wait <= 0 {
		return f, c.Usagef("--write-wait must be positive")
	}
	if f.listen == "" {
		f.listen = "none"
	}
	if f.socket != "" && f.socket != "none" && !filepath.IsAbs(f.socket) {
		return f, c.Usagef("--socket %s: want an absolute path (or none)", f.socket)
	}
	if f.noToken && f.listen == "none" {
		return f, c.Usagef("--no-token is about TCP, and --listen is none")
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
