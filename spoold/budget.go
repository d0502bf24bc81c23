package spoold

import "time"

// budget is a token bucket of bytes, refilled at progressRate up to
// progressBurst; its zero value is full. Spending may take it below zero; nothing more is allowed
// until it is back at zero, so what is written over any span t is at most
// progressBurst + progressRate*t + one document.
type budget struct {
	tokens float64
	at     time.Time
}

func (b *budget) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(progressBurst, b.tokens+d.Seconds()*progressRate)
		b.at = now
	}
}

// wait is how long until a write is allowed (0: now).
func (b *budget) wait(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / progressRate * float64(time.Second))
}

func (b *budget) spend(n int, now time.Time) {
	b.refill(now)
	b.tokens -= float64(n)
}
