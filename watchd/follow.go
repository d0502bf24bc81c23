package watchd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// ErrTimeout is returned by Follow when its timeout passed before the end.
var ErrTimeout = errors.New("timed out waiting for the run to end")

// FollowConfig configures Follow, `watchd follow`'s loop.
type FollowConfig struct {
	Spool *spool.Spool
	Chat  string
	Job   string // optional: the one job to follow
	// Began is the follower's start; the zero time means now. The caller
	// takes it before anything else, so nothing written after the command
	// started can count as stale.
	Began   time.Time
	JSON    bool          // Open WebUI status events instead of text lines
	Every   time.Duration // at most one status per Every (0: all)
	Timeout time.Duration // 0: none
	Poll    time.Duration // poll instead of inotify
	Out     io.Writer     // one write per line
	Log     logrus.FieldLogger
}

// Follow prints the chat's run, one line per status, until it ends, and
// returns its end. On timeout it prints a last line (with --json one with
// "done": true, so Open WebUI's spinner stops) and returns ErrTimeout; when
// ctx is done it returns ctx's error.
func Follow(ctx context.Context, cfg FollowConfig) (*Output, error) {
	began := cfg.Began
	if began.IsZero() {
		began = time.Now()
	}
	hub, err := NewHub(cfg.Spool, HubConfig{Poll: cfg.Poll, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go hub.Run(hctx)
	w, err := NewFollower(cfg.Spool, hub, cfg.Chat, Guards{Began: spool.Stamp(began), Job: cfg.Job})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, began.Add(cfg.Timeout), ErrTimeout)
		defer cancel()
	}
	return relay(ctx, cfg.Chat, cfg.JSON, cfg.Every, cfg.Out, w.Next)
}

// relay prints what next gives, one line per output (Open WebUI status
// events with asJSON), at most one status per every, until the End, which
// it returns. When ctx ends with ErrTimeout as its cause, it prints a last
// line (with asJSON one with "done": true) and returns ErrTimeout.
func relay(ctx context.Context, chat string, asJSON bool, every time.Duration, w io.Writer,
	next func(context.Context, <-chan time.Time) ([]Output, error)) (*Output, error) {
	say := func(o Output) error {
		line := TextLine(o)
		if asJSON {
			line = JSONLine(o)
		}
		_, err := w.Write(line)
		return err
	}
	th := &Throttle{Every: every}
	var timer *time.Timer
	for {
		var wake <-chan time.Time
		if due := th.Due(); !due.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(due))
			} else {
				timer.Reset(time.Until(due))
			}
			wake = timer.C
		}
		out, err := next(ctx, wake)
		if err != nil {
			if errors.Is(context.Cause(ctx), ErrTimeout) {
				line := []byte("timed out waiting for chat " + chat + "'s run to end\n")
				if asJSON {
					line = StatusLine("timed out waiting for the run to end", true)
				}
				w.Write(line)
				return nil, ErrTimeout
			}
			return nil, err
		}
		now := time.Now()
		var lines []Output
		if len(out) == 0 {
			lines = th.Tick(now)
		}
		for _, o := range out {
			lines = append(lines, th.Offer(o, now)...)
		}
		for _, o := range lines {
			if err := say(o); err != nil {
				return nil, err
			}
			if o.Kind == End {
				return &o, nil
			}
		}
	}
}

// CheckJob says whether job is one to follow on chat, for `watchd follow
// --job`, which would otherwise wait for ever: the spool holds it (or the
// chat's document names it: a run written by hand), and its spec, when
// there is one, names chat.
func CheckJob(s *spool.Spool, chat, job string) error {
	if _, err := s.State(job); err != nil {
		if doc, _, derr := s.ProgressHead(chat); derr == nil && doc.Job == job {
			return nil
		}
		if errors.Is(err, spool.ErrNoJob) {
			return fmt.Errorf("job %s: %w in spool %s (spool ls lists its jobs)", job, spool.ErrNoJob, s.RootPath)
		}
		return err
	}
	if sp, err := s.ReadSpec(job); err == nil && sp.Chat != chat {
		return fmt.Errorf("job %s is chat %s's, not %s's: follow it with --chat %s", job, sp.Chat, chat, sp.Chat)
	}
	return nil
}

// EndedRun is the end of the chat's last run when a follow without a job
// has nothing to wait for yet: the chat's document says its run is done
// and was written before the follow began, and no job of the chat is
// new, queued or running. Else nil. `watchd follow` says it, then waits
// for the chat's next run.
func EndedRun(s *spool.Spool, chat string, began time.Time) *Output {
	doc, err := s.ReadProgress(chat)
	if err != nil || !doc.Done || doc.Job == "" {
		return nil
	}
	if w := doc.Written; w == 0 || w >= spool.Stamp(began) {
		return nil
	}
	jobs, _, err := s.Scan()
	if err != nil {
		return nil
	}
	for job, f := range jobs {
		st, ok := f.State()
		if !ok || st.Final() {
			continue
		}
		sp, err := s.ReadSpec(job)
		if err != nil || sp.Chat == chat {
			// One it cannot read may be the chat's: wait, as before.
			return nil
		}
	}
	o := endOf(doc)
	return &o
}
