package spool

import (
	"os"
	"strings"
	"testing"
	"time"
)

func old(t testing.TB, s *Spool, name string, age time.Duration) {
	t.Helper()
	tm := time.Now().Add(-age)
	if err := os.Chtimes(s.Path(name), tm, tm); err != nil {
		t.Fatal(err)
	}
}

func kinds(fs []Finding) string {
	var k []string
	for _, f := range fs {
		k = append(k, f.Kind+":"+f.Name)
	}
	return strings.Join(k, " ")
}

func TestFsckClean(t *testing.T) {
	s := testSpool(t)
	id, _ := s.Submit(argvSpec("c", "x"))
	id2, _ := s.Submit(argvSpec("d", "x"))
	l, _, _ := s.Claim(id2, Lease{Worker: "w", Host: "h", PID: os.Getpid()})
	s.End(Ending{Result: &Result{Job: id2, Chat: "d", State: Done, Attempt: l.Attempt}, Lease: l})
	s.WriteProgress(&Progress{Job: id, Chat: "c"})
	writeRaw(t, s, ".fresh.json123", "")
	found, err := s.Fsck(FsckOptions{})
	if err != nil || len(found) != 0 {
		t.Fatalf("clean spool: %v, %v", kinds(found), err)
	}
}

// Each kind of finding is found, and --fix repairs it the documented way.
func TestFsckFindsAndFixes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Spool)
		kind  string
		check func(t *testing.T, s *Spool)
	}{
		{"marker without spec", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.ready", "")
		}, FindMarkerWithoutSpec, func(t *testing.T, s *Spool) {
			if exists(s, "j.ready") || !exists(s, "corrupt/j.ready") || !exists(s, "corrupt/j.ready.why") {
				t.Error("marker not quarantined")
			}
		}},
		{"final beside running", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			writeRaw(t, s, "j.running", `{"job":"j","worker":"w","host":"elsewhere","pid":1,"lease_s":30}`)
			writeRaw(t, s, "j.done", `{"job":"j","state":"done"}`)
		}, FindTwoStates, func(t *testing.T, s *Spool) {
			if exists(s, "j.running") || !exists(s, "j.done") {
				t.Error("the final document did not win")
			}
		}},
		{"ready beside running", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			writeRaw(t, s, "j.running", `{"job":"j","worker":"w","host":"elsewhere","pid":1,"lease_s":3000}`)
			writeRaw(t, s, "j.ready", ``)
		}, FindTwoStates, func(t *testing.T, s *Spool) {
			if exists(s, "j.ready") || !exists(s, "j.running") {
				t.Error(".running not kept")
			}
		}},
		{"dead worker on this host, attempts left", func(t *testing.T, s *Spool) {
			id, _ := s.Submit(&Spec{ID: "j", Chat: "c", Argv: []string{"x"}, Attempts: 2})
			s.Claim(id, Lease{Worker: "w", Host: "h", PID: 1 << 30, LeaseS: 3000})
		}, FindDeadLease, func(t *testing.T, s *Spool) {
			if st, _ := s.State("j"); st != Queued {
				t.Errorf("state %s, want queued", st)
			}
			if m, _ := s.ReadMarker("j"); m.Attempt != 2 {
				t.Errorf("next attempt %d, want 2", m.Attempt)
			}
		}},
		{"dead worker, no attempts left", func(t *testing.T, s *Spool) {
			id, _ := s.Submit(&Spec{ID: "j", Chat: "c", Argv: []string{"x"}})
			s.Claim(id, Lease{Worker: "w", Host: "h", PID: 1 << 30, LeaseS: 3000})
		}, FindDeadLease, func(t *testing.T, s *Spool) {
			r, err := s.ReadResult("j", Failed)
			if err != nil || r.Error == nil || *r.Error != "worker w died" || r.Chat != "c" || r.Attempt != 1 {
				t.Errorf("result %+v, %v", r, err)
			}
			if exists(s, "j.running") {
				t.Error("lease left")
			}
		}},
		{"stale heartbeat on another host", func(t *testing.T, s *Spool) {
			id, _ := s.Submit(&Spec{ID: "j", Chat: "c", Argv: []string{"x"}, Attempts: 3})
			s.Claim(id, Lease{Worker: "w", Host: "elsewhere", PID: 1, LeaseS: 30})
			old(t, s, "j.running", time.Minute)
		}, FindDeadLease, func(t *testing.T, s *Spool) {
			if st, _ := s.State("j"); st != Queued {
				t.Errorf("state %s, want queued", st)
			}
		}},
		{"claimer died before writing its lease", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			writeRaw(t, s, "j.running", ``)
			old(t, s, "j.running", 2*time.Minute)
		}, FindDeadLease, func(t *testing.T, s *Spool) {
			if st, _ := s.State("j"); st != Queued {
				t.Errorf("state %s, want queued", st)
			}
		}},
		{"old temporary", func(t *testing.T, s *Spool) {
			writeRaw(t, s, ".j.json4242", "{")
			old(t, s, ".j.json4242", 2*time.Hour)
		}, FindOldTemporary, func(t *testing.T, s *Spool) {
			if exists(s, ".j.json4242") {
				t.Error("temporary left")
			}
		}},
		{"old temporary in progress/", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "progress/.c123", "{")
			old(t, s, "progress/.c123", 2*time.Hour)
		}, FindOldTemporary, func(t *testing.T, s *Spool) {
			if exists(s, "progress/.c123") {
				t.Error("temporary left")
			}
		}},
		{"queued job whose spec does not parse", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c"}`)
			writeRaw(t, s, "j.ready", ``)
		}, FindCorrupt, func(t *testing.T, s *Spool) {
			r, err := s.ReadResult("j", Failed)
			if err != nil || r.Error == nil || !strings.Contains(*r.Error, "corrupt/j.json") {
				t.Errorf("result %+v, %v", r, err)
			}
			if exists(s, "j.ready") || exists(s, "j.json") || !exists(s, "corrupt/j.json.why") {
				t.Error("marker or spec left, or no .why")
			}
		}},
		{"result that does not parse", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			writeRaw(t, s, "j.done", `{`)
		}, FindCorrupt, func(t *testing.T, s *Spool) {
			r, err := s.ReadResult("j", Failed)
			if err != nil || r.Chat != "c" || !exists(s, "corrupt/j.done") || exists(s, "j.done") {
				t.Errorf("result %+v, %v", r, err)
			}
		}},
		{"progress that does not parse", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "progress/c", `{`)
		}, FindCorrupt, func(t *testing.T, s *Spool) {
			if exists(s, "progress/c") || !exists(s, "corrupt/progress_c") {
				t.Error("not quarantined")
			}
		}},
		{"answer that does not parse", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "chats/c/answer.json", `nope`)
		}, FindCorrupt, func(t *testing.T, s *Spool) {
			if exists(s, "chats/c/answer.json") || !exists(s, "corrupt/chats_c_answer.json") {
				t.Error("not quarantined")
			}
		}},
		{"abandoned hand submission", func(t *testing.T, s *Spool) {
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			old(t, s, "j.json", 2*time.Hour)
		}, FindAbandonedSpec, func(t *testing.T, s *Spool) {
			if exists(s, "j.json") || !exists(s, "corrupt/j.json") {
				t.Error("not quarantined")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpool(t)
			tc.setup(t, s)
			before := tree(t, s.RootPath)
			found, err := s.Fsck(FsckOptions{Host: "h"})
			if err != nil || len(found) != 1 || found[0].Kind != tc.kind {
				t.Fatalf("found %q, %v; want one %s", kinds(found), err, tc.kind)
			}
			if after := tree(t, s.RootPath); strings.Join(before, " ") != strings.Join(after, " ") {
				t.Fatalf("fsck without --fix changed the tree: %v -> %v", before, after)
			}
			if strings.Contains(found[0].String(), "\n") {
				t.Errorf("finding of more than one line: %q", found[0])
			}
			fixed, err := s.Fsck(FsckOptions{Host: "h", Fix: true})
			if err != nil || len(fixed) != 1 || !fixed[0].Fixed() {
				t.Fatalf("fix: %+v, %v", fixed, err)
			}
			tc.check(t, s)
			if again, _ := s.Fsck(FsckOptions{Host: "h"}); len(again) != 0 {
				t.Errorf("after the fix: %s", kinds(again))
			}
		})
	}
}

// A lease whose worker lives, or whose job's processes still hold the
// spec's lock, is not dead.
func TestFsckLiveLeases(t *testing.T) {
	s := testSpool(t)
	host, _ := os.Hostname()
	id, _ := s.Submit(argvSpec("c", "x"))
	st, _ := ProcessStart(os.Getpid())
	s.Claim(id, Lease{Worker: "w", Host: host, PID: os.Getpid(), PIDStart: st, Boot: BootID(), LeaseS: 1})
	old(t, s, id+ExtRunning, time.Hour)
	id2, _ := s.Submit(argvSpec("d", "x"))
	s.Claim(id2, Lease{Worker: "w", Host: host, PID: 1 << 30, LeaseS: 30})
	lock, ok, err := s.LockSpec(id2)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	defer lock.Close()
	if found, _ := s.Fsck(FsckOptions{}); len(found) != 0 {
		t.Fatalf("live leases reported: %s", kinds(found))
	}
}

// TestFsckLeaseBound: a lease's own lease_s is believed up to
// FsckOptions.Lease, as spoold believes it up to its --lease: a planted
// lease of 10^9 s on another host, its heartbeat a minute old, is dead by
// the default (30 s), and alive by a lease of an hour; one that records
// no lease_s is judged by Lease too.
func TestFsckLeaseBound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease string
		opt   time.Duration
		dead  bool
	}{
		{"a planted lease_s, by the default", `"lease_s":1e9`, 0, true},
		{"a planted lease_s of 1e300", `"lease_s":1e300`, 0, true},
		{"a planted lease_s, by a longer --lease", `"lease_s":1e9`, time.Hour, false},
		{"no lease_s, by the default", `"lease_s":0`, 0, true},
		{"a negative lease_s", `"lease_s":-5`, 0, true},
		{"no lease_s, by a longer --lease", `"lease_s":0`, time.Hour, false},
		{"a shorter lease_s is its own", `"lease_s":10`, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpool(t)
			writeRaw(t, s, "j.json", `{"chat":"c","argv":["x"]}`)
			writeRaw(t, s, "j.running", `{"job":"j","worker":"w","host":"elsewhere","pid":1,"attempt":1,`+tc.lease+`}`)
			old(t, s, "j.running", time.Minute)
			found, err := s.Fsck(FsckOptions{Host: "h", Lease: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			if dead := kinds(found) == FindDeadLease+":j.running"; dead != tc.dead {
				t.Errorf("findings %q; want dead %v", kinds(found), tc.dead)
			}
		})
	}
}
