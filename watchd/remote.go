package watchd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Remote is where a client finds `watchd serve`, as a URL names it
// (docs/watchd.md, "Addresses"):
//
//	unix:/var/spool/vm/watchd/serve.sock    the unix socket (unix:///... too)
//	/var/spool/vm/watchd/serve.sock         the same
//	http://127.0.0.1:8377                   TCP, with the token
//	http://127.0.0.1:8377/#token=T          the address watchd serve prints
//	http://127.0.0.1:8377/?token=T          the same, as it printed it before
//	https://watch.example.org/vm/           behind a proxy, under a prefix
//
// Over the socket no token is needed (its mode decides who connects);
// over TCP the token goes in an "Authorization: Bearer" header, never in
// the request's URL.
type Remote struct {
	Socket string   // the socket's path, or "" for TCP
	Base   *url.URL // scheme, host and path prefix of the requests
	Token  string   // "" when none is known
}

// ParseRemote reads a URL that names watchd serve.
func ParseRemote(s string) (*Remote, error) {
	switch {
	case strings.HasPrefix(s, "unix:") || strings.HasPrefix(s, "/"):
		p := strings.TrimPrefix(s, "unix:")
		if strings.HasPrefix(p, "//") {
			p = p[2:]
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("watchd address %q: a unix socket is unix:/ABSOLUTE/PATH", s)
		}
		return &Remote{Socket: filepath.Clean(p), Base: &url.URL{Scheme: "http", Host: "localhost"}}, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("watchd address %q: want http://HOST:PORT[/PREFIX], https://... or unix:/PATH", s)
	}
	r := &Remote{Base: &url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}}
	r.Token = u.Query().Get("token")
	if frag, err := url.ParseQuery(u.EscapedFragment()); err == nil && frag.Has("token") {
		r.Token = frag.Get("token")
	}
	return r, nil
}

// String is the address without its token.
func (r *Remote) String() string {
	if r.Socket != "" {
		return "unix:" + r.Socket
	}
	return r.Base.String()
}

// Client is an HTTP client that reaches r: over the socket, whatever the
// URL's host, when r is one. A socket path longer than a socket address
// may be (108 bytes) is reached through its directory's handle.
func (r *Remote) Client() *http.Client {
	if r.Socket == "" {
		return &http.Client{}
	}
	path := r.Socket
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			if len(path) < 100 {
				return d.DialContext(ctx, "unix", path)
			}
			dir, err := os.OpenFile(filepath.Dir(path), os.O_RDONLY|syscall.O_DIRECTORY, 0)
			if err != nil {
				return nil, err
			}
			defer dir.Close()
			return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(dir.Fd()))+"/"+filepath.Base(path))
		},
	}}
}

// URL is the request URL of path (with its query) under r's base.
func (r *Remote) URL(path string) string {
	u := *r.Base
	p, q, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawQuery = q
	return u.String()
}

// Request is a GET of path with the token, if one is known.
func (r *Remote) Request(ctx context.Context, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL(path), nil)
	if err != nil {
		return nil, err
	}
	if r.Token != "" && r.Socket == "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	return req, nil
}

// ErrRefused wraps an answer of watchd serve that retrying will not
// change: a bad id, a missing or wrong token, a host it does not serve.
var ErrRefused = errors.New("refused")

// RemoteConfig configures FollowRemote.
type RemoteConfig struct {
	Remote *Remote
	Chat   string
	Job    string // optional: the one job to follow
	JSON   bool
	Every  time.Duration
	// Timeout counts from Began (the zero time: now).
	Timeout time.Duration
	Began   time.Time
	Out     io.Writer
	// Retry is the pause before a broken stream is opened again (resuming
	// after the last event had). Default 1s.
	Retry time.Duration
}

// FollowRemote is Follow over watchd serve's event stream instead of the
// tree: the server applies the guards (its own clock stamps the start of
// each stream), and the lines printed are Follow's. A stream that breaks
// before the end is opened again, resuming after the last event had;
// an answer that retrying would not change (ErrRefused), or no answer at
// all to the first request, is an error.
func FollowRemote(ctx context.Context, cfg RemoteConfig) (*Output, error) {
	began := cfg.Began
	if began.IsZero() {
		began = time.Now()
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, began.Add(cfg.Timeout), ErrTimeout)
		defer cancel()
	}
	rs := &remoteStream{cfg: cfg, client: cfg.Remote.Client(), job: cfg.Job, out: make(chan remoteBatch)}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go rs.run(sctx)
	next := func(ctx context.Context, wake <-chan time.Time) ([]Output, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
			return nil, nil
		case b := <-rs.out:
			return b.outs, b.err
		}
	}
	return relay(ctx, cfg.Chat, cfg.JSON, cfg.Every, cfg.Out, next)
}

type remoteBatch struct {
	outs []Output
	err  error
}

// remoteStream reads the chat's event stream, opening it again when it
// breaks, and hands each event to out.
type remoteStream struct {
	cfg    RemoteConfig
	client *http.Client
	job    string
	last   string // the last event id had
	out    chan remoteBatch
}

func (rs *remoteStream) run(ctx context.Context) {
	for first := true; ; first = false {
		err := rs.once(ctx)
		if errors.Is(err, errStreamEnded) || ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrRefused) || first && rs.last == "" {
			select {
			case rs.out <- remoteBatch{err: err}:
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-time.After(rs.cfg.Retry):
		case <-ctx.Done():
			return
		}
	}
}

var errStreamEnded = errors.New("stream ended")

// maxSSELine bounds a line of the stream: a server of this version writes
// at most MaxStreamWrite in all.
const maxSSELine = 1 << 20

func (rs *remoteStream) once(ctx context.Context) error {
	q := url.Values{}
	if rs.job != "" {
		q.Set("job", rs.job)
	}
	path := "/chats/" + url.PathEscape(rs.cfg.Chat) + "/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := rs.cfg.Remote.Request(ctx, path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if rs.last != "" {
		req.Header.Set("Last-Event-ID", rs.last)
	}
	resp, err := rs.client.Do(req)
	if err != nil {
		return fmt.Errorf("watchd serve at %s: %w", rs.cfg.Remote, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("watchd serve at %s: %s", rs.cfg.Remote, resp.Status)
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
		return fmt.Errorf("watchd serve at %s: %s: %s: %w", rs.cfg.Remote, resp.Status, msg, ErrRefused)
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var id, data []byte
	for {
		line, err := readLine(rd)
		if err != nil {
			return err
		}
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				var m Message
				if err := json.Unmarshal(data, &m); err != nil {
					return fmt.Errorf("watchd serve at %s: an event that does not parse: %v", rs.cfg.Remote, err)
				}
				o := m.Output()
				if rs.job == "" {
					rs.job = o.Job
				}
				rs.last = string(id)
				select {
				case rs.out <- remoteBatch{outs: []Output{o}}:
				case <-ctx.Done():
					return ctx.Err()
				}
				if o.Kind == End {
					return errStreamEnded
				}
			}
			id, data = nil, nil
		case bytes.HasPrefix(line, []byte("id:")):
			id = bytes.TrimSpace(line[3:])
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
	}
}

// readLine reads one line of a stream, without its end, refusing one
// longer than maxSSELine.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, more, err := rd.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > maxSSELine {
			return nil, fmt.Errorf("a line of the stream passed %d bytes", maxSSELine)
		}
		if !more {
			return line, nil
		}
	}
}

// Output is the output a Message carries.
func (m Message) Output() Output {
	return Output{Kind: m.Kind, Job: m.Job, Seq: m.Seq, Event: m.Event, Text: m.Text, Question: m.Question,
		Skipped: m.Skipped, State: m.State, Exit: m.Exit, Error: m.Error}
}
