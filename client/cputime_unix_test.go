//go:build unix

package ratelimitclient_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time. Benchmarks report it
// per op besides ns/op: on a shared machine wall time per op includes the
// time other processes held the CPU, CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU nanoseconds per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	if d := cpuTime() - start; d > 0 {
		b.ReportMetric(float64(d)/float64(b.N), "cpu-ns/op")
	}
}
