package labelcap

// DefaultMax is the number of distinct (rule, key kind) pairs that the
// metrics integrations give values of their own unless configured otherwise.
const DefaultMax = 1000

// Other is the rule and key kind label of the pairs a Cap folds together.
const Other = "other"

// DurationBuckets returns the default bounds, in seconds, of the store
// duration histogram of the metrics integrations: 50µs to 1s, for memory
// stores and networked ones alike. Each call returns a new slice.
func DurationBuckets() []float64 {
	return []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
}

// WaitBuckets returns the default bounds, in seconds, of the fair-queuing
// wait histogram of the metrics integrations: 1 ms to 10 s, the range of
// MaxWait. Each call returns a new slice.
func WaitBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// Settings are the options the metrics integrations share: how many
// distinct pairs get values of their own (the max of New) and the bucket
// bounds, in seconds, of a histogram. The zero value has no cap and no
// bounds: start from the integration's defaults and apply Options.
type Settings struct {
	MaxRules int
	Buckets  []float64
}

// Option sets a field of Settings. The metrics integrations convert it to
// their own Option type.
type Option func(*Settings)

// MaxRules returns an Option that sets MaxRules to n. It panics, naming pkg
// (the integration's package, such as "ratelimitprom"), if n < 1.
func MaxRules(pkg string, n int) Option {
	if n < 1 {
		panic(pkg + ": WithMaxRules needs at least 1")
	}
	return func(s *Settings) { s.MaxRules = n }
}

// Buckets returns an Option that sets Buckets to a copy of bounds, so that
// the caller may reuse its slice. It panics, naming pkg, if bounds is empty.
func Buckets(pkg string, bounds []float64) Option {
	if len(bounds) == 0 {
		panic(pkg + ": WithBuckets needs at least one bound")
	}
	bounds = append([]float64(nil), bounds...)
	return func(s *Settings) { s.Buckets = bounds }
}

// Apply returns the default Settings (DefaultMax pairs, buckets as the
// bounds) after opts, in order. O is the Option type of an integration, a
// func(*Settings).
func Apply[O ~func(*Settings)](buckets []float64, opts []O) Settings {
	s := Settings{MaxRules: DefaultMax, Buckets: buckets}
	for _, opt := range opts {
		opt(&s)
	}
	return s
}
