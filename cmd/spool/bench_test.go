package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// benchSpool writes n jobs quickly (no fsync: a fixture): 97% done, 1%
// each queued, running, failed; a spec and events for each.
func benchSpool(tb testing.TB, dir string, n int) {
	tb.Helper()
	t0 := time.Now().Add(-48 * time.Hour)
	for i := 0; i < n; i++ {
		id := spool.NewJobID(t0.Add(time.Duration(i) * time.Millisecond))
		chat := fmt.Sprintf("chat%d", i%500)
		files := map[string]string{
			id + ".json":   fmt.Sprintf(`{"id":%q,"chat":%q,"created":%f,"argv":["make","job%d"]}`+"\n", id, chat, spool.Stamp(t0), i),
			id + ".events": `{"seq":1,"type":"status","text":"hi"}` + "\n",
		}
		switch i % 100 {
		case 1:
			files[id+".ready"] = ""
		case 2:
			files[id+".running"] = fmt.Sprintf(`{"job":%q,"chat":%q,"worker":"w","host":"h","pid":1,"attempt":1,"lease_s":30}`, id, chat)
		case 3:
			files[id+".failed"] = fmt.Sprintf(`{"job":%q,"chat":%q,"state":"failed","exit":1,"error":"exit 1","attempt":1}`, id, chat)
		default:
			files[id+".done"] = fmt.Sprintf(`{"job":%q,"chat":%q,"state":"done","exit":0,"error":null,"started":%f,"finished":%f,"attempt":1}`, id, chat, spool.Stamp(t0), spool.Stamp(t0))
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), spool.FileMode); err != nil {
				tb.Fatal(err)
			}
		}
	}
	syscall.Sync()
}
