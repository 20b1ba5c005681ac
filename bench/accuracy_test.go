package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

func TestMaxInWindow(t *testing.T) {
	adm := []Admission{{Sent: 0, Recv: 10}, {Sent: 500, Recv: 600}, {Sent: 990, Recv: 1001}, {Sent: 1000, Recv: 1005}}
	// [0, 1000µs] holds only the first two whole (the third is answered at
	// 1001µs); [500, 1500µs] holds the last three.
	if got := MaxInWindow(adm[:3], time.Millisecond); got != 2 {
		t.Errorf("MaxInWindow(first three) = %d, want 2", got)
	}
	if got := MaxInWindow(adm, time.Millisecond); got != 3 {
		t.Errorf("MaxInWindow = %d, want 3", got)
	}
	if got := MaxInWindow(adm, 2*time.Millisecond); got != 4 {
		t.Errorf("MaxInWindow(2ms) = %d, want 4", got)
	}
}

func TestMaxPerAlignedWindow(t *testing.T) {
	sec := int64(time.Second / time.Microsecond)
	adm := []Admission{
		{Sent: 10*sec - 300, Recv: 10*sec - 100, ResetAfter: 200 * time.Microsecond},     // decided at 10s-200µs
		{Sent: 10*sec - 100, Recv: 10*sec + 100, ResetAfter: 999_990 * time.Microsecond}, // decided at 10s+10µs
		{Sent: 10*sec + 5, Recv: 10*sec + 50, ResetAfter: 999_980 * time.Microsecond},
	}
	most, unplaced := MaxPerAlignedWindow(adm, time.Second)
	if most != 2 || unplaced != 0 {
		t.Errorf("MaxPerAlignedWindow = %d, %d; want 2, 0", most, unplaced)
	}
}

// TestAccuracyShort runs each algorithm for a moment on a real Redis.
func TestAccuracyShort(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a second per algorithm")
	}
	srv := startRedis(t)
	for _, alg := range Algorithms {
		run, err := RunAccuracy(srv, alg, Steady, 4, 2, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if run.Errors > 0 || len(run.Admitted) == 0 {
			t.Fatalf("%v: %d errors, %d admitted of %d", alg, run.Errors, len(run.Admitted), run.Checks)
		}
		for _, c := range Checks(run) {
			if alg != ratelimit.SlidingWindow && !c.OK {
				t.Errorf("%v: %+v", alg, c)
			}
			t.Logf("%v: %d checks, %d admitted; %s: %d (bound %d)", alg, run.Checks, len(run.Admitted), c.What, c.Max, c.Bound)
		}
	}
}

func TestTimelineSeries(t *testing.T) {
	s := TimelineSeries()
	if len(s) != len(Algorithms)+1 {
		t.Fatalf("%d series", len(s))
	}
	peak := func(s Series) float64 {
		m := 0.0
		for _, y := range s.Y {
			m = max(m, y)
		}
		return m
	}
	// The fixed window admits twice its rate in the second that straddles
	// the boundary at 5 s.
	if p := peak(s[2]); p < 190 {
		t.Errorf("fixed window peaks at %v per trailing second, want about 200", p)
	}
}
