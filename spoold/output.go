package spoold

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// output carries a job's stdout and stderr into <job>.log through a pipe
// that spoold reads, where the job has no cgroup, rather than handing the
// job the log's own descriptor. A descriptor of the log, once handed out,
// cannot be taken back: a process that left the job's group and session
// kept writing to the log after the job's end, past its limit, as long as
// it lived, and without a cgroup nothing finds such a process for sure.
// Through the pipe, spoold is the log's one writer while the run lives,
// holds the log to its limit whoever writes into the pipe, and closes its
// end with the run: a writer left behind then gets EPIPE, and never
// reaches the log. The pipe also tells spoold for certain whether any
// process still holds the job's output (end of file comes only when
// every copy of the write end is closed), and its inode marks the
// processes that do (holders, group.go).
//
// The costs: a copy in spoold of what the job prints, 64 KiB a read; and
// a job whose spoold dies gets EPIPE (SIGPIPE) at its next write to
// stdout or stderr. With a cgroup, the job writes the log itself (run.go,
// stdout): nothing of it outlives the run.
type output struct {
	r    *run
	rd   *os.File // spoold's end
	wr   *os.File // the job's end, closed here once the job has started
	log  *os.File
	ino  uint64        // the pipe's inode
	done chan struct{} // closed when the copy has ended: end of file, or stop
	size int64         // the log's size, as the copy knows it
	cut  time.Time     // when the log was last cut
	err  error         // the first write that failed
}

// openOutput opens the job's log and the pipe the job writes into.
func (r *run) openOutput() (*output, error) {
	log, err := r.d.s.OpenLog(r.job)
	if err != nil {
		return nil, err
	}
	fi, err := log.Stat()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("job %s: log: %w", r.job, err)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("cannot make the job's output pipe: %w", err)
	}
	o := &output{r: r, rd: rd, wr: wr, log: log, size: fi.Size(), done: make(chan struct{})}
	if st, err := wr.Stat(); err == nil {
		o.ino = st.Sys().(*syscall.Stat_t).Ino
	}
	return o, nil
}

// started closes spoold's copy of the job's end and starts the copy; or,
// if the job did not start (ok false), closes everything.
func (o *output) started(ok bool) {
	o.wr.Close()
	if !ok {
		o.rd.Close()
		o.log.Close()
		close(o.done)
		return
	}
	go o.copy()
}

// copy moves what the job writes into its log until end of file (every
// writer gone) or stop, holding the log to its limit as it goes.
func (o *output) copy() {
	defer close(o.done)
	defer o.log.Close()
	defer o.rd.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := o.rd.Read(buf)
		if n > 0 {
			o.write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				o.r.log.WithError(err).Warn("reading the job's output")
			}
			return
		}
	}
}

// write appends b to the log, then cuts the log if it passed its limit:
// at most every limitEvery, the copy waiting meanwhile, so that a job
// printing faster than the cuts keep up with waits on its full pipe
// rather than the log growing past its limit.
func (o *output) write(b []byte) {
	if _, err := o.log.Write(b); err != nil {
		if o.err == nil {
			// The job's output is dropped (it keeps running); said once.
			o.err = err
			o.r.log.WithError(err).Warn("cannot write the job's log: its output is dropped")
		}
		return
	}
	o.size += int64(len(b))
	lim := o.r.use.lim.Log
	if lim <= 0 || o.size <= lim {
		return
	}
	if wait := limitEvery - time.Since(o.cut); wait > 0 {
		time.Sleep(wait)
	}
	o.r.cutLog(o.size)
	o.cut = time.Now()
	if fi, err := o.log.Stat(); err == nil {
		o.size = fi.Size()
	}
}

// ended reports whether the copy has ended: every writer of the pipe is
// gone (or stop was called).
func (o *output) ended() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// wait waits up to limit for the copy to end.
func (o *output) wait(limit time.Duration) bool {
	select {
	case <-o.done:
		return true
	case <-time.After(limit):
		return false
	}
}

// stop closes spoold's end of the pipe: a writer still holding the job's
// end gets EPIPE from then on.
func (o *output) stop() { o.rd.Close() }

// logMark is the line a cut leaves in the log.
func logMark(lim, size int64) string {
	head, tail := lim/2, lim/4
	return fmt.Sprintf("\n[spoold: this log passed its limit of %s: %s cut here. Above: its first %s; below: the newest output]\n",
		spool.FormatSize(lim), spool.FormatSize(size-head-tail), spool.FormatSize(head))
}
