package bench

import "slices"

// Median is the middle of xs (the mean of the two middle ones when their
// number is even), or 0 when there are none. xs is left as it was.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}
