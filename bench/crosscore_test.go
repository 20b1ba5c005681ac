package bench

import (
	"runtime"
	"testing"
	"time"
)

// The probe measures a hand-over between two threads: a positive time,
// bounded even on a machine whose other work delays the threads (the
// tests of every module run at once); with one processor, nothing.
func TestCrossCoreProbeMeasuresAHandOver(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		if ns := CrossCoreNs(1000); ns != 0 {
			t.Fatalf("CrossCoreNs = %.0f with one processor, want 0", ns)
		}
		return
	}
	if ns := CrossCoreNs(1000); ns <= 0 || ns > 1e8 {
		t.Fatalf("CrossCoreNs = %.0f ns, want within (0, 100ms]", ns)
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	if ns := CrossCoreNs(1000); ns != 0 {
		t.Fatalf("CrossCoreNs = %.0f with GOMAXPROCS 1, want 0", ns)
	}
}

// A probe stops at its time limit, however many hand-overs it was asked
// for, and reports the time of those it made.
func TestCrossCoreProbeStopsAtItsLimit(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the probe needs two processors")
	}
	done := make(chan float64, 1)
	go func() { done <- CrossCoreNs(1 << 50) }()
	select {
	case ns := <-done:
		if ns <= 0 {
			t.Fatalf("CrossCoreNs = %.0f ns, want a positive time", ns)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a probe of 2^50 hand-overs did not stop at its %v limit", probeLimit)
	}
}
