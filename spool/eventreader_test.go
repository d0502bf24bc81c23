package spool

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// LastEvents returns the last complete lines as EventReader reads them,
// numbered when the whole file was read and counting what it left out;
// past TailWindow it reads the end only, and says how much it did not.
func TestLastEvents(t *testing.T) {
	steps := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "step %d\n", i)
		}
		return b.String()
	}
	flood := strings.Repeat("\n", TailWindow+100)
	long := strings.Repeat("x", MaxEventLine+1) + "\n"
	for _, tc := range []struct {
		name    string
		content string // "" for no file
		n       int
		want    []string // each event as "seq type text"
		older   int64
		unread  int64
	}{
		{"no file", "", 10, nil, 0, 0},
		{"fewer than n", steps(1, 3), 10, []string{"1 status step 1", "2 status step 2", "3 status step 3"}, 0, 0},
		{"more than n", steps(1, 12), 2, []string{"11 status step 11", "12 status step 12"}, 10, 0},
		{"a last line without its newline waits", steps(1, 2) + "step 3", 10, []string{"1 status step 1", "2 status step 2"}, 0, 0},
		{"JSON lines", `{"type":"question","id":"q1","text":"Go on?"}` + "\n\n" + `{"seq":99,"type":"status","text":"x"}` + "\n", 10,
			[]string{"1 question Go on?", "2 status ", "3 status x"}, 0, 0},
		{"a line too long to relay", steps(1, 1) + long + steps(3, 3), 10,
			[]string{"1 status step 1", fmt.Sprintf("2 status (event line 2 of %d bytes is too long to relay)", MaxEventLine+1), "3 status step 3"}, 0, 0},
		// A flood of empty lines: the end only, unnumbered. The window's
		// first line, which may have begun before it, is left out too
		// (here an empty line: one byte).
		{"past the window", flood + steps(1, 3), 2, []string{"0 status step 2", "0 status step 3"}, 0,
			int64(len(flood)+3*7) - TailWindow + 1},
		{"past the window, too long in it", flood + long + steps(1, 1), 2,
			[]string{fmt.Sprintf("0 status (an event line of %d bytes is too long to relay)", MaxEventLine+1), "0 status step 1"}, 0,
			int64(len(flood)+len(long)+7) - TailWindow + 1},
		{"one line longer than the window", strings.Repeat("x", 2*TailWindow) + "\n", 10, nil, 0, 2*TailWindow + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpool(t)
			if tc.content != "" {
				writeRaw(t, s, "j.events", tc.content)
			}
			tail, err := s.LastEvents("j", tc.n)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range tail.Events {
				got = append(got, fmt.Sprintf("%d %s %s", ev.Seq, ev.Type, ev.Text))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || tail.Older != tc.older || tail.Unread != tc.unread {
				t.Errorf("got %q, older %d, unread %d; want %q, older %d, unread %d",
					got, tail.Older, tail.Unread, tc.want, tc.older, tc.unread)
			}
		})
	}
}

// LastEvents reads TailWindow bytes whatever the file's size: counted by
// the kernel (rchar of this thread, to which the test is locked) over a
// sparse file of 1 GiB, which reading whole would cost a second.
func TestLastEventsReadsTheEnd(t *testing.T) {
	s := testSpool(t)
	f, err := os.Create(s.Path("j.events"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("\nlast\n"), 1<<30)
	f.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadRead(t)
	tail, err := s.LastEvents("j", 10)
	read := threadRead(t) - before
	if err != nil || len(tail.Events) != 1 || tail.Events[0].Text != "last" {
		t.Fatalf("LastEvents: %v: %+v", err, tail)
	}
	if read > 2*TailWindow {
		t.Errorf("LastEvents read %d bytes of a file of 1 GiB", read)
	}
}

// threadRead is the bytes the calling thread has read (rchar of
// /proc/thread-self/io).
func threadRead(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Skip("no /proc/thread-self/io:", err)
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return n
}
