package watchd

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/vmspool/vmspool/spool"
)

// TestChatsListsWaitingAndBounded is the third round's item 3: GET
// /chats read the first 1,000 names of progress/ in directory order and
// kept 500 of them before it sorted, so that with 1,200 chats most of
// those waiting for a person were not listed; and it read every document
// whole, so that big documents cost seconds a listing. Now every waiting
// chat and the newest others are listed, and a listing reads each
// document's head once per version.
func TestChatsListsWaitingAndBounded(t *testing.T) {
	s, err := spool.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.MkdirAll(s.Path(spool.ProgressDir), 0o750); err != nil {
		t.Fatal(err)
	}
	// 1,200 chats; five of them, the oldest, wait for an answer; every
	// tenth document carries 256 KB of events.
	big := `,"events":[` + strings.Repeat(`{"seq":1,"type":"status","text":"`+strings.Repeat("z", 1000)+`"},`, 256) + `{"seq":2,"type":"status","text":"z"}]`
	const n = 1200
	for i := range n {
		state, updated := "running", 1_700_000_100+float64(i)
		if i < 5 {
			state, updated = "waiting", 1_700_000_000+float64(i)
		}
		events := `,"events":[]`
		if i%10 == 9 {
			events = big
		}
		doc := fmt.Sprintf(`{"job":"J%d","chat":"c%d","seq":2,"updated":%.0f,"started":%.0f,"done":false,"state":%q,"status":"s%d"%s,"question":null}`, i, i, updated, updated, state, i, events)
		if err := os.WriteFile(s.Path(spool.ProgressPath(fmt.Sprintf("c%d", i))), []byte(doc), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	srv := NewServer(ServerConfig{Spool: s, MaxChats: 500})
	listing := func() []ChatInfo {
		t.Helper()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest("GET", "/chats", nil))
		var list []ChatInfo
		if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil {
			t.Fatalf("GET /chats: %d %v", w.Code, err)
		}
		return list
	}
	list := listing()
	if len(list) != 500 {
		t.Errorf("listed %d chats; want 500", len(list))
	}
	waiting, newest := 0, 0
	for i, c := range list {
		if c.State == spool.Waiting {
			waiting++
		}
		if i > 0 && c.Updated > list[i-1].Updated {
			t.Fatalf("not newest first at %d: %v after %v", i, c.Updated, list[i-1].Updated)
		}
		if c.State != spool.Waiting && c.Updated >= 1_700_000_100+float64(n-495) {
			newest++
		}
	}
	if waiting != 5 {
		t.Errorf("%d of the 5 chats waiting for an answer listed", waiting)
	}
	if newest != 495 {
		t.Errorf("%d of the 495 newest chats listed", newest)
	}
	if srv.chats.reads != n {
		t.Errorf("the first listing read %d heads; want %d", srv.chats.reads, n)
	}
	// Nothing changed: nothing is read again. One document rewritten:
	// that one is.
	listing()
	if srv.chats.reads != n {
		t.Errorf("a listing of unchanged documents read %d heads more", srv.chats.reads-n)
	}
	doc := `{"job":"J9","chat":"c9","seq":3,"updated":1800000000,"started":1,"done":true,"state":"done","status":"over","events":[]}`
	if err := os.WriteFile(s.Path(spool.ProgressPath("c9")), []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	list = listing()
	if srv.chats.reads != n+1 || list[0].Chat != "c9" || list[0].Status != "over" {
		t.Errorf("after one document changed: %d more heads read, first %+v", srv.chats.reads-n, list[0])
	}
}
