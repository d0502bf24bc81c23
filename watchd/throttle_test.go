package watchd

import (
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	st := func(s string) Output { return Output{Kind: Status, Text: s} }
	th := &Throttle{Every: time.Second}
	var said []string
	put := func(os []Output) {
		for _, o := range os {
			said = append(said, o.Text)
		}
	}
	put(th.Offer(st("a"), at(0)))   // first: at once
	put(th.Offer(st("b"), at(100))) // held
	put(th.Offer(st("c"), at(200))) // newest wins
	if due := th.Due(); !due.Equal(at(1000)) {
		t.Fatalf("due %v, want %v", due, at(1000))
	}
	put(th.Tick(at(999)))
	put(th.Tick(at(1000))) // c
	put(th.Offer(st("d"), at(1500)))
	put(th.Offer(Output{Kind: Question, Text: "q"}, at(1600))) // never held; d dropped as older news
	put(th.Offer(st("e"), at(1700)))
	put(th.Offer(Output{Kind: End, Text: "end"}, at(1800))) // never held
	put(th.Tick(at(5000)))
	want := "a c q end"
	if got := join(said); got != want {
		t.Errorf("said %q, want %q", got, want)
	}
}

func TestThrottleOff(t *testing.T) {
	th := &Throttle{}
	n := 0
	for i := 0; i < 10; i++ {
		n += len(th.Offer(Output{Kind: Status}, time.Unix(0, 0)))
	}
	if n != 10 {
		t.Errorf("passed %d of 10", n)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
