package vmgate

import (
	"reflect"
	"testing"
	"time"
)

// FuzzCheck: no input panics or hangs the gate, and the same script gets
// the same verdict twice (the gate holds no state between decisions).
func FuzzCheck(f *testing.F) {
	for _, tc := range seedCases {
		f.Add(tc.script)
	}
	for _, tc := range tableCases {
		f.Add(tc.script)
	}
	f.Fuzz(func(t *testing.T, script string) {
		done := make(chan Verdict, 1)
		go func() { done <- Check(script) }()
		var v1 Verdict
		timer := time.NewTimer(5 * time.Second)
		select {
		case v1 = <-done:
			timer.Stop()
		case <-timer.C:
			t.Fatalf("Check(%q) did not return in 5s", script)
		}
		v2 := Check(script)
		if !reflect.DeepEqual(v1, v2) {
			t.Fatalf("Check(%q) gave two verdicts:\n%+v\n%+v", script, v1, v2)
		}
		if v1.Allowed != (v1.Reason == nil) || v1.Git != nil && (v1.Reason == nil || *v1.Reason != string(ReasonGitWrite)) {
			t.Fatalf("Check(%q) = inconsistent verdict %+v", script, v1)
		}
	})
}
