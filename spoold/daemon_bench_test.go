package spoold

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmspool/vmspool/spool"
)

// BenchmarkDaemonNoop runs b.N no-op argv jobs through a daemon in this
// process (for profiling the claim-run-finish path; tests/ has the figures
// with the real binary).
var benchChats = 64

func BenchmarkDaemonNoop(b *testing.B) {
	for _, w := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers-%d", w), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "spool")
			s, err := spool.Create(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("j%07d", i)
				spec, _ := json.Marshal(map[string]any{"chat": fmt.Sprintf("c%d", i%benchChats), "argv": []string{"true"}})
				os.WriteFile(filepath.Join(dir, id+".json"), spec, 0o640)
				os.WriteFile(filepath.Join(dir, id+".ready"), nil, 0o640)
			}
			d, err := New(Config{Spool: s, Workers: w, Env: []string{"PATH=" + os.Getenv("PATH")}})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			b.ResetTimer()
			go func() { d.Run(ctx); close(done) }()
			last := fmt.Sprintf("j%07d", b.N-1)
			for {
				if st, _ := s.State(last); st.Final() {
					break
				}
				time.Sleep(time.Millisecond) // the poll of the wait
			}
			for {
				jobs, _, _ := s.Scan()
				n := 0
				for _, f := range jobs {
					if f&spool.HasDone != 0 {
						n++
					}
				}
				if n == b.N {
					break
				}
				time.Sleep(5 * time.Millisecond) // the poll of the wait
			}
			b.StopTimer()
			cancel()
			<-done
		})
	}
}
