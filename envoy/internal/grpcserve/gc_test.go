package grpcserve

import (
	"runtime/debug"
	"testing"
)

// The process collects garbage at DefaultGCPercent, unless GOGC is set.
func TestCommandGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	TuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("GOGC unset: the collector's percent is %d, want %d", got, DefaultGCPercent)
	}
	TuneGC(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: the collector's percent is %d, want the operator's 100", got)
	}
}
