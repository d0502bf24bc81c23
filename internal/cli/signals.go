package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Signals is the two-signal stop every command shares: the first SIGINT or
// SIGTERM cancels Context (finish what is running, within the grace), the
// second closes Now (stop at once). Signals are caught from the moment
// CatchSignals returns, so a stop that comes while a daemon starts up finds
// the handler, not the default action, and is acted on once it runs.
type Signals struct {
	ch     chan os.Signal
	ctx    context.Context
	cancel context.CancelFunc
	now    chan struct{}
	done   chan struct{} // closed by Stop
	exited chan struct{} // closed when loop returns
	once   sync.Once
	hooks  sync.Mutex // held while hooks run

	mu         sync.Mutex
	first      os.Signal
	second     bool
	onFirst    func(os.Signal)
	onSecond   func()
	ranF, ranS bool
}

// CatchSignals starts catching SIGINT and SIGTERM. Stop ends it.
func CatchSignals() *Signals {
	s := &Signals{ch: make(chan os.Signal, 2), now: make(chan struct{}), done: make(chan struct{}), exited: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	signal.Notify(s.ch, syscall.SIGINT, syscall.SIGTERM)
	go s.loop()
	return s
}

func (s *Signals) loop() {
	defer close(s.exited)
	select {
	case sig := <-s.ch:
		s.mu.Lock()
		s.first = sig
		s.mu.Unlock()
		s.run()
		s.cancel()
	case <-s.done:
		return
	}
	select {
	case <-s.ch:
		s.mu.Lock()
		s.second = true
		s.mu.Unlock()
		close(s.now)
		s.run()
	case <-s.done:
	}
}

// run calls the hooks due and not yet called, each once, one at a time
// and in order.
func (s *Signals) run() {
	s.hooks.Lock()
	defer s.hooks.Unlock()
	s.mu.Lock()
	var f func(os.Signal)
	var g func()
	sig := s.first
	if sig != nil && !s.ranF && s.onFirst != nil {
		f, s.ranF = s.onFirst, true
	}
	if s.second && !s.ranS && s.onSecond != nil {
		g, s.ranS = s.onSecond, true
	}
	s.mu.Unlock()
	if f != nil {
		f(sig)
	}
	if g != nil {
		g()
	}
}

// OnSignal sets what is done at each signal, besides Context and Now:
// first (say it in the log, tell systemd) before Context is cancelled,
// second (stop at once) after Now is closed. A signal that came before
// OnSignal has its hook called by OnSignal itself. Stop waits for a hook
// under way.
func (s *Signals) OnSignal(first func(os.Signal), second func()) {
	s.mu.Lock()
	s.onFirst, s.onSecond = first, second
	s.mu.Unlock()
	s.run()
}

// Context is done at the first signal (or Stop).
func (s *Signals) Context() context.Context { return s.ctx }

// Now is closed at the second signal.
func (s *Signals) Now() <-chan struct{} { return s.now }

// First is the first signal caught, nil before one came.
func (s *Signals) First() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// ExitCode is the conventional code of a command a signal stopped, 128+n,
// so that a caller never reads it as the outcome of what was watched; it
// is ExitFail when no signal came.
func (s *Signals) ExitCode() int {
	if sig, ok := s.First().(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return ExitFail
}

// Stop stops catching signals (they take their default action again),
// cancels Context, and returns once a hook under way has returned.
func (s *Signals) Stop() {
	s.once.Do(func() {
		signal.Stop(s.ch)
		close(s.done)
	})
	s.cancel()
	<-s.exited
}
