package labelcap

import (
	"slices"
	"strings"
	"testing"
)

func TestMaxRulesPanicsBelowOneNamingThePackage(t *testing.T) {
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "pkgname: WithMaxRules") {
					t.Errorf("MaxRules(%d) panic = %q, want the pkgname: WithMaxRules prefix", n, msg)
				}
			}()
			MaxRules("pkgname", n)
		}()
	}
	var s Settings
	MaxRules("pkgname", 1)(&s)
	if s.MaxRules != 1 {
		t.Errorf("MaxRules(1) set %d", s.MaxRules)
	}
}

func TestBucketsPanicsWhenEmptyAndCopiesTheBounds(t *testing.T) {
	func() {
		defer func() {
			msg, _ := recover().(string)
			if !strings.HasPrefix(msg, "pkgname: WithBuckets") {
				t.Errorf("Buckets() panic = %q, want the pkgname: WithBuckets prefix", msg)
			}
		}()
		Buckets("pkgname", nil)
	}()
	bounds := []float64{0.1, 1}
	opt := Buckets("pkgname", bounds)
	bounds[0] = 99 // the caller reuses its slice
	var s Settings
	opt(&s)
	if len(s.Buckets) != 2 || s.Buckets[0] != 0.1 || s.Buckets[1] != 1 {
		t.Errorf("Buckets = %v, want [0.1 1] whatever the caller does to its slice", s.Buckets)
	}
}

func TestApplyStartsFromTheDefaultsAndAppliesOptionsInOrder(t *testing.T) {
	type option func(*Settings) // an integration's own Option type
	def := []float64{1, 2}
	if s := Apply[option](def, nil); s.MaxRules != DefaultMax || len(s.Buckets) != 2 {
		t.Errorf("Apply(no options) = %+v, want DefaultMax and the default bounds", s)
	}
	s := Apply(def, []option{option(MaxRules("p", 5)), option(MaxRules("p", 7)), option(Buckets("p", []float64{3}))})
	if s.MaxRules != 7 || len(s.Buckets) != 1 || s.Buckets[0] != 3 {
		t.Errorf("Apply = %+v, want the last MaxRules (7) and bounds [3]", s)
	}
}

func TestDefaultBucketsAscendAndAreNewEachCall(t *testing.T) {
	for name, f := range map[string]func() []float64{"DurationBuckets": DurationBuckets, "WaitBuckets": WaitBuckets} {
		b := f()
		if !slices.IsSorted(b) || len(slices.Compact(slices.Clone(b))) != len(b) {
			t.Errorf("%s() = %v, want strictly ascending bounds", name, b)
		}
		b[0] = 99 // an integration's exported default, changed by its user
		if f()[0] == 99 {
			t.Errorf("%s() returned a slice an earlier caller had changed", name)
		}
	}
	if b := DurationBuckets(); b[0] != .00005 || b[len(b)-1] != 1 {
		t.Errorf("DurationBuckets() = %v, want 50µs to 1s", b)
	}
	if b := WaitBuckets(); b[0] != .001 || b[len(b)-1] != 10 {
		t.Errorf("WaitBuckets() = %v, want 1ms to 10s", b)
	}
}
