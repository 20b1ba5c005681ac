package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
)

// units are the period names of the short form, "100/min".
var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// parseRate parses the short form of a limit: "<n>/<period>" with an
// optional " burst <m>", where period is a unit (s, min, hour, day, ...) or
// a Go duration ("30s", "1m30s"). n may be 0 only when allowZero is set (a
// blocking override).
func parseRate(s string, allowZero bool) (ratelimit.Limit, error) {
	f := strings.Fields(s)
	if len(f) != 1 && (len(f) != 3 || f[1] != "burst") {
		return ratelimit.Limit{}, fmt.Errorf("limit %q: want <n>/<period>, optionally followed by burst <n>, e.g. 100/min burst 20", s)
	}
	num, per, found := strings.Cut(f[0], "/")
	if !found {
		return ratelimit.Limit{}, fmt.Errorf("limit %q: want <n>/<period>, e.g. 100/min", s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return ratelimit.Limit{}, fmt.Errorf("limit %q: %q is not a count", s, num)
	}
	period, err := parsePeriod(per)
	if err != nil {
		return ratelimit.Limit{}, fmt.Errorf("limit %q: %v", s, err)
	}
	l := ratelimit.Limit{Rate: n, Period: period}
	if len(f) == 3 {
		b, err := strconv.Atoi(f[2])
		if err != nil || b < 0 {
			return ratelimit.Limit{}, fmt.Errorf("limit %q: burst %q is not a count", s, f[2])
		}
		l.Burst = b
	}
	return l, checkLimit(l, allowZero)
}

func parsePeriod(s string) (time.Duration, error) {
	if d, ok := units[s]; ok {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("period %q: use s, min, hour, day or a duration such as 30s", s)
	}
	return d, nil
}

// checkLimit validates l as the core does, except that a zero rate passes
// when allowZero is set.
func checkLimit(l ratelimit.Limit, allowZero bool) error {
	if l.Rate == 0 && allowZero {
		return nil
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "ratelimit: "))
	}
	return nil
}
