package spool

import (
	"fmt"
	"os"
)

// OpenLog opens <job>.log for appending: the job's stdout and stderr.
func (s *Spool) OpenLog(job string) (*os.File, error) {
	if err := CheckJobID(job); err != nil {
		return nil, err
	}
	f, err := openAppend(s.root, job+ExtLog)
	if err != nil {
		return nil, fmt.Errorf("job %s: log: %w", job, err)
	}
	return f, nil
}

// CutLog keeps <job>.log within a limit while the job still appends to it:
// the file is cut back to its first head bytes, then a line marking the
// cut and the last tail bytes it held are appended; the job's own appends
// (O_APPEND) go on after them. So the log keeps its head and its newest
// part. It returns how many bytes were dropped (what the job wrote between
// the read of the tail and the cut is among them). The file is reached as
// every name of the tree is: never through a link, never anything but a
// plain file.
func (s *Spool) CutLog(job string, head, tail int64, mark string) (int64, error) {
	if err := CheckJobID(job); err != nil {
		return 0, err
	}
	f, fi, err := openRegular(s.root, job+ExtLog, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return 0, fmt.Errorf("job %s: log: %w", job, err)
	}
	defer f.Close()
	size := fi.Size()
	if size <= head+tail {
		return 0, nil
	}
	last := make([]byte, tail)
	n, err := f.ReadAt(last, size-tail)
	if err != nil && n < len(last) {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	now, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	if err := f.Truncate(head); err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	if _, err := f.Write(append([]byte(mark), last[:n]...)); err != nil {
		return 0, fmt.Errorf("job %s: log: cut: %w", job, err)
	}
	return now.Size() - head - int64(n), nil
}
