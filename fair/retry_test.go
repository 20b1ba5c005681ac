package fair

import (
	"net/http"
	"testing"
)

// Retry-After follows the backlog and the observed service time, from 1 to
// 32 seconds.
func TestRetryAfterFollowsTheBacklog(t *testing.T) {
	f := New(Config{Seats: 4, Levels: []Level{{Name: "l", Shares: 1}}})
	lv := f.levels[0]
	lv.svc = 1 // seconds
	for _, c := range []struct {
		queued, qlen, active int
		want                 int64
	}{
		{0, 0, 0, 1},    // nothing ahead: the floor
		{8, 0, 0, 2},    // 8 waiting over 4 seats of 1s
		{10, 0, 0, 3},   // rounded up
		{400, 0, 0, 32}, // the ceiling
		{0, 6, 2, 3},    // a full queue of 6, 2 queues active: its share is 2 seats
	} {
		lv.queued = c.queued
		for i := range lv.queues {
			lv.queues[i].waiters = nil
		}
		for i := range c.active {
			lv.queues[i].waiters = make([]*waiter, 1)
		}
		if got := lv.retryAfter(c.qlen); got != c.want {
			t.Errorf("queued %d, qlen %d, %d active: Retry-After %d, want %d", c.queued, c.qlen, c.active, got, c.want)
		}
	}
	lv.svc = 0.001
	lv.queued = 100
	if got := lv.retryAfter(0); got != 1 {
		t.Errorf("quick service: Retry-After %d, want 1", got)
	}
}

func TestSeatsFuncBelowOneCountsAsOne(t *testing.T) {
	n := -5
	f := New(Config{SeatsFunc: func() int { return n }, Levels: []Level{{Name: "l", Shares: 1}}})
	if s := f.Stats().Seats; s != 1 {
		t.Errorf("seats %d, want 1", s)
	}
	n = 0
	f.mu.Lock()
	f.setSeats(f.readSeats())
	f.mu.Unlock()
	if s := f.Stats().Seats; s != 1 {
		t.Errorf("seats %d, want 1", s)
	}
}

// SeatsFunc runs outside the lock: it may look at the Scheduler it drives.
func TestSeatsFuncMayCallBackIntoTheScheduler(t *testing.T) {
	var f *Scheduler
	f = New(Config{
		SeatsFunc: func() int {
			if f != nil {
				return f.Stats().InUse + 1 // grows with use
			}
			return 1
		},
		Levels: []Level{{Name: "l", Shares: 1}},
	})
	for i := range 3 {
		if _, ok := f.Admit(nopWriter{}, &http.Request{}); !ok {
			t.Fatalf("admission %d refused", i)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}
