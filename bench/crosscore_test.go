package bench

import (
	"runtime"
	"testing"
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
