package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// periodUnits are the period names ParseLimit accepts besides Go durations.
var periodUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// ParseLimit parses the short form of a limit, as written in configuration
// files and flags: "<n>/<period>", optionally followed by "burst <m>", such
// as "100/min", "10/s burst 20" or "5/30s". The period is a unit (s, sec,
// second, m, min, minute, h, hour, d, day) or a Go duration ("30s",
// "1m30s"); n and m are decimal digits. It reads back what Limit.String
// writes.
//
// The Limit it returns is valid (see Limit.Validate). Any other input gives
// an error prefixed "ratelimit:" and wrapping ErrInvalidLimit, which names
// the input and what is wrong with it. A calendar quota ("10000 a day in
// Europe/Paris") is not a Limit: see Daily, Weekly and Monthly.
func ParseLimit(s string) (Limit, error) {
	l, problem := parseLimit(s)
	if problem == "" {
		if err := l.Validate(); err != nil {
			problem = strings.TrimPrefix(err.Error(), ErrInvalidLimit.Error()+": ")
		}
	}
	if problem != "" {
		return Limit{}, fmt.Errorf("%w %q: %s", ErrInvalidLimit, s, problem)
	}
	return l, nil
}

// parseLimit reads the short form of a limit without validating it, or says
// what is wrong with its syntax.
func parseLimit(s string) (Limit, string) {
	f := strings.Fields(s)
	if len(f) != 1 && (len(f) != 3 || f[1] != "burst") {
		return Limit{}, "want <n>/<period>, optionally followed by burst <n>, e.g. 100/min burst 20"
	}
	num, per, found := strings.Cut(f[0], "/")
	if !found {
		return Limit{}, "want <n>/<period>, e.g. 100/min"
	}
	n, ok := parseCount(num)
	if !ok {
		return Limit{}, fmt.Sprintf("%q is not a count", num)
	}
	period, ok := periodUnits[per]
	if !ok {
		d, err := time.ParseDuration(per)
		if err != nil || d <= 0 {
			return Limit{}, fmt.Sprintf("period %q: use s, min, hour, day or a duration such as 30s", per)
		}
		period = d
	}
	l := Limit{Rate: n, Period: period}
	if len(f) == 3 {
		if l.Burst, ok = parseCount(f[2]); !ok {
			return Limit{}, fmt.Sprintf("burst %q is not a count", f[2])
		}
	}
	return l, ""
}

// parseCount reads a count written in decimal digits only (no sign); one
// too large for an int is not a count, and one too large for a Limit is
// left to Validate to report.
func parseCount(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
