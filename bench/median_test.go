package bench

import (
	"slices"
	"testing"
)

// TestMedianLeavesItsInputAlone: Median is the middle value, or the mean of
// the two middle ones, and does not reorder the samples a caller keeps.
func TestMedianLeavesItsInputAlone(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{40}, 40}, {[]float64{2900, 30, 40}, 40}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median reordered %v into %v", in, c.xs)
		}
	}
}
