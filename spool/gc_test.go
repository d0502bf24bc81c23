package spool

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestGC(t *testing.T) {
	s := testSpool(t)
	ended := func(chat string, st State, age time.Duration) string {
		id, _ := s.Submit(argvSpec(chat, "x"))
		l, _, _ := s.Claim(id, Lease{Worker: "w", Host: "h", PID: 1})
		s.AppendEvent(id, Event{Text: "hi"})
		lf, _ := s.OpenLog(id)
		lf.Close()
		s.End(Ending{Result: &Result{Job: id, Chat: chat, State: st, Attempt: l.Attempt}, Lease: l})
		old(t, s, id+st.Ext(), age)
		// The end wrote the chat's progress under its lock, as any run
		// does; the chat's files are aged below.
		return id
	}
	oldDone := ended("a", Done, 8*24*time.Hour)
	oldFailed := ended("b", Failed, 8*24*time.Hour)
	newDone := ended("a", Done, time.Hour)
	// A queued job whose files are old is never collected, nor its chat.
	queued, _ := s.Submit(argvSpec("live", "x"))
	old(t, s, queued+ExtSpec, 30*24*time.Hour)
	old(t, s, queued+ExtReady, 30*24*time.Hour)
	for _, c := range []string{"a", "live", "gone"} {
		s.WriteProgress(&Progress{Job: "x", Chat: c})
		old(t, s, "progress/"+c, 9*24*time.Hour)
		s.WriteAnswer(c, &Answer{Job: "x", Question: "q", Answer: "y"})
		old(t, s, "chats/"+c+"/answer.json", 9*24*time.Hour)
		if c == "a" {
			old(t, s, "chats/"+c+"/lock", 9*24*time.Hour)
		}
	}
	// A chat whose lock is held (a daemon runs its job) is kept.
	s.WriteAnswer("held", &Answer{Job: "x"})
	old(t, s, "chats/held/answer.json", 9*24*time.Hour)
	lock, ok, _ := s.LockChat("held")
	if !ok {
		t.Fatal("lock")
	}
	old(t, s, "chats/held/lock", 9*24*time.Hour)
	defer lock.Close()

	// What a collection that stopped half-way left.
	writeRaw(t, s, "half.events", "x\n")
	writeRaw(t, s, "half.log", "x\n")
	old(t, s, "half.events", 8*24*time.Hour)
	old(t, s, "half.log", 8*24*time.Hour)
	writeRaw(t, s, "fresh.events", "x\n")

	before := tree(t, s.RootPath)
	var dry []string
	if err := s.GC(GCOptions{DryRun: true}, func(n string) { dry = append(dry, n) }); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, s.RootPath); strings.Join(before, " ") != strings.Join(after, " ") {
		t.Fatal("--dry-run changed the tree")
	}
	var removed []string
	if err := s.GC(GCOptions{}, func(n string) { removed = append(removed, n) }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(dry)
	sort.Strings(removed)
	if strings.Join(dry, " ") != strings.Join(removed, " ") {
		t.Errorf("dry run %v, real run %v", dry, removed)
	}
	want := []string{}
	for _, id := range []string{oldDone, oldFailed} {
		st := Done
		if id == oldFailed {
			st = Failed
		}
		want = append(want, id+ExtSpec, id+st.Ext(), id+ExtEvents, id+ExtLog)
	}
	want = append(want, "progress/a", "progress/gone", "chats/a", "chats/gone", "half.events", "half.log")
	sort.Strings(want)
	if strings.Join(removed, " ") != strings.Join(want, " ") {
		t.Errorf("removed\n %v\nwant\n %v", removed, want)
	}
	for _, n := range []string{newDone + ExtDone, queued + ExtSpec, queued + ExtReady, "progress/live", "chats/live/answer.json", "chats/held/answer.json", "fresh.events"} {
		if !exists(s, n) {
			t.Errorf("%s was removed", n)
		}
	}
	if exists(s, "chats/gone") {
		t.Error("chats/gone left")
	}
}
