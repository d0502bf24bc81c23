package tests

// The third round's attacks on what the commands print: text of the tree
// written for a terminal, and a file show read whole.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// attackEscapes is a status that, printed raw, sets the operator's
// clipboard (OSC 52), rings the bell and clears the screen; its C1 CSI
// (U+009B) and bidirectional override make the same point in UTF-8.
const attackEscapes = `done\u001b]52;c;ZWNobyBoaQ==\u0007\u001b[2J\u009b2J\u202e`

// attackRaw says which byte sequence of a terminal escape out holds, or "".
func attackRaw(out string) string {
	for _, raw := range []string{"\x1b", "\a", "\u009b", "\u202e"} {
		if strings.Contains(out, raw) {
			return fmt.Sprintf("%q", raw)
		}
	}
	return ""
}

// A job's status, question, events, lease and result carry terminal
// escapes. spool show and watchd follow printed them raw (the clipboard
// set, the screen cleared); so did spool ls (the lease's worker) and spool
// answer's error (the question's options). Every human-readable output
// now escapes them (spool.Printable): \x1b]52;... is printed as text.
func TestAttackTerminalEscapes(t *testing.T) {
	dir := newSpool(t)
	spool := func(args ...string) (string, error) {
		out, err := command(raceEnv(), "spool", append([]string{"--spool", dir}, args...)...).CombinedOutput()
		return string(out), err
	}
	for _, id := range []string{"run1", "end1"} {
		if out, err := spool("submit", "--chat", "c", "--id", id, "--", "true"); err != nil {
			t.Fatalf("submit: %v: %s", err, out)
		}
	}
	plant := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	// run1 runs, asks, and its chat's document says so; end1 failed.
	os.Remove(filepath.Join(dir, "run1.ready"))
	os.Remove(filepath.Join(dir, "end1.ready"))
	plant("run1.running", `{"job":"run1","chat":"c","worker":"w`+attackEscapes+`","host":"vm","pid":42,"claimed":1700000000,"attempt":1,"lease_s":30}`)
	plant("run1.events", "plain "+"\x1b[2J\n"+
		`{"type":"status","text":"`+attackEscapes+`"}`+"\n"+
		`{"type":"question","id":"q1","text":"go `+attackEscapes+`?","options":["yes`+attackEscapes+`","no"]}`+"\n")
	os.MkdirAll(filepath.Join(dir, "progress"), 0o750)
	now := time.Now().Unix()
	plant("progress/c", fmt.Sprintf(`{"job":"run1","chat":"c","seq":3,"updated":%d,"state":"waiting","status":"%s",`+
		`"events":[{"seq":2,"type":"status","text":"%[2]s"}],`+
		`"question":{"id":"q1","text":"go %[2]s?","options":["yes%[2]s","no"],"asked":%[1]d}}`, now, attackEscapes))
	plant("end1.failed", `{"job":"end1","chat":"c","state":"failed","exit":1,"error":"`+attackEscapes+`","started":1700000000,"finished":1700000100,"attempt":1,"limits":["log: `+attackEscapes+`"]}`)

	for _, args := range [][]string{{"show", "run1"}, {"show", "end1"}, {"ls"}, {"answer", "--chat", "c", "maybe"}} {
		out, _ := spool(args...)
		if raw := attackRaw(out); raw != "" || !strings.Contains(out, `\x1b]52;c;`) {
			t.Errorf("spool %s printed %s raw: %q", strings.Join(args, " "), raw, out)
		}
	}
	out, _ := spool("show", "run1")
	for _, want := range []string{`status:    done\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J\u009b2J\u202e`, `question:  q1 go done\x1b]52`, `worker wdone\x1b]52`} {
		if !strings.Contains(out, want) {
			t.Errorf("spool show run1 lacks %q:\n%s", want, out)
		}
	}

	// The run ends (its last document, then its result); watchd follow
	// prints its last events from the chat's document.
	plant("progress/c", fmt.Sprintf(`{"job":"run1","chat":"c","seq":3,"updated":%d,"done":true,"state":"failed","exit":1,"error":"%s",`+
		`"events":[{"seq":2,"type":"status","text":"%[2]s"},{"seq":3,"type":"gate","text":"refused:\n%[2]s"}]}`, now, attackEscapes))
	os.Remove(filepath.Join(dir, "run1.running"))
	plant("run1.failed", `{"job":"run1","chat":"c","state":"failed","exit":1,"error":"`+attackEscapes+`","started":1700000000,"finished":1700000100,"attempt":1}`)
	fout, _ := command(raceEnv(), "watchd", "follow", "--spool", dir, "--chat", "c", "--job", "run1", "--timeout", "10s").CombinedOutput()
	if raw := attackRaw(string(fout)); raw != "" || strings.Count(string(fout), `\x1b]52;c;`) != 3 {
		t.Errorf("watchd follow printed %s raw: %q", raw, fout)
	}
}

// 200 MB of empty lines in a job's events took spool show 66 s of CPU:
// it parsed every line to keep the last ten. It reads the file's last MiB
// now, and says that it did not read the rest. 16 MB of them took 9 s of
// CPU before under the race detector, 0.1 s now; the bound is loose.
func TestAttackShowEventsFlood(t *testing.T) {
	dir := newSpool(t)
	if out, err := command(raceEnv(), "spool", "--spool", dir, "submit", "--chat", "c", "--id", "flood", "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("submit: %v: %s", err, out)
	}
	f, err := os.Create(filepath.Join(dir, "flood.events"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"start","text":"attempt 1"}` + "\n")
	nl := []byte(strings.Repeat("\n", 1<<20))
	for i := 0; i < 16; i++ {
		f.Write(nl)
	}
	f.WriteString(`{"type":"question","id":"q1","text":"Go on?","options":["yes","no"]}` + "\n" + "after the flood\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show", "flood"}, {"show", "flood", "--json"}} {
		show := command(raceEnv(), "spool", append([]string{"--spool", dir}, args...)...)
		out, err := show.CombinedOutput()
		if err != nil {
			t.Fatalf("spool %s: %v: %.300s", strings.Join(args, " "), err, out)
		}
		cpu := show.ProcessState.UserTime() + show.ProcessState.SystemTime()
		t.Logf("spool %s: %v of CPU", strings.Join(args, " "), cpu)
		if cpu > 2*time.Second {
			t.Errorf("spool %s took %v of CPU on 16 MB of empty lines", strings.Join(args, " "), cpu)
		}
		s := string(out)
		if args[len(args)-1] == "--json" {
			if !strings.Contains(s, `"events_unread_bytes": `) || !strings.Contains(s, `"text": "after the flood"`) {
				t.Errorf("spool show --json: %.2000s", s)
			}
			continue
		}
		for _, want := range []string{"(older events not shown: the file's first 15.0 MiB were not read)",
			"     -  question  Go on?\n     -  status    after the flood\n"} {
			if !strings.Contains(s, want) {
				t.Errorf("spool show lacks %q:\n%s", want, s)
			}
		}
	}
}
