package ratelimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestDailyQuotaTurnsAtMidnight: a daily quota's window is worked out once
// per day and reused, and a request one second after midnight counts in
// the new day, including the 23-hour day of a switch to summer time.
func TestDailyQuotaTurnsAtMidnight(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	for _, day := range []time.Time{
		time.Date(2026, 3, 10, 23, 59, 59, 0, paris), // an ordinary day
		time.Date(2026, 3, 28, 23, 59, 59, 0, paris), // the next day has 23 hours
	} {
		clock := ratelimittest.NewClock(day)
		h := ratelimit.NewRules([]ratelimit.Rule{{Name: "daily", Quota: ratelimit.Daily(2, paris), Key: ratelimit.ByIP()}},
			ratelimit.WithClock(clock), ratelimit.WithStore(memory.New(memory.WithClock(clock))))(okHandler)
		get := func() int { return ratelimittest.Get(h, "/").Code }
		if a, b, c := get(), get(), get(); a != 200 || b != 200 || c != http.StatusTooManyRequests {
			t.Fatalf("%v: %d %d %d, want 200 200 429", day, a, b, c)
		}
		clock.Advance(2 * time.Second) // 00:00:01 the next day
		if a, b, c := get(), get(), get(); a != 200 || b != 200 || c != http.StatusTooManyRequests {
			t.Fatalf("%v + 2s: %d %d %d, want a new day: 200 200 429", day, a, b, c)
		}
		clock.Advance(-3 * time.Second) // back before midnight: that day's count is spent
		if c := get(); c != http.StatusTooManyRequests {
			t.Fatalf("%v - 1s: %d, want the spent day's 429", day, c)
		}
	}
}
