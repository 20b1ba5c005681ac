package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// CrossCoreNs measures how long a cache line written on one core takes to
// be read on another: two goroutines, on two threads, hand a counter back
// and forth n times each (each waits for the other's write and answers
// it), and the time of one hand-over is returned, in nanoseconds. It
// returns 0 when GOMAXPROCS is 1. Both goroutines spin: on a machine busy
// with other work, a hand-over waits for the operating system to run the
// other thread, and the probe says so, within probeLimit.
//
// On a virtual machine this changes with where the hypervisor runs the
// virtual processors: on one 2-core machine it measured 25-35 ns most of
// the time and 165-195 ns for episodes of tens of seconds. A request that
// moves a line between the cores (a lock, a key's state, written by both)
// costs that much more for each line, so a row measured at -cpu 2 in such
// an episode is slower than outside it by as many hand-overs as its
// requests make. BenchmarkConfigurationPairs probes before each of the
// row's turns and reports the median of the probes (xcore-ns): a probe
// that the operating system stops for a moment times microseconds, once.
func CrossCoreNs(n int64) float64 {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	var turn atomic.Int64
	var stop atomic.Bool
	timer := time.AfterFunc(probeLimit, func() { stop.Store(true) })
	defer timer.Stop()
	var wg sync.WaitGroup
	start := time.Now()
	for g := range int64(2) {
		wg.Go(func() {
			for k := range n {
				mine := 2*k + g
				for turn.Load() != mine {
					if stop.Load() {
						return
					}
				}
				turn.Store(mine + 1)
			}
		})
	}
	wg.Wait()
	return float64(time.Since(start).Nanoseconds()) / float64(max(1, turn.Load()))
}

// probeLimit bounds a probe's time: on a machine so busy that the two
// threads seldom run at once, a hand-over waits for the operating system,
// and the probe stops and reports the time of the hand-overs it made.
const probeLimit = 20 * time.Millisecond
