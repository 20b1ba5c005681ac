package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"go.yaml.in/yaml/v3"
)

// parseRate parses the short form of a limit, "100/min burst 20", with
// ratelimit.ParseLimit, so that a rules file reads limits exactly as the
// core does. n may be 0 only when allowZero is set (a blocking override):
// the rest of the form is then checked as if n were 1.
func parseRate(s string, allowZero bool) (ratelimit.Limit, error) {
	parsed, zero := s, false
	if num, rest, ok := strings.Cut(strings.TrimSpace(s), "/"); allowZero && ok && num != "" && strings.Trim(num, "0") == "" {
		parsed, zero = "1/"+rest, true
	}
	l, err := ratelimit.ParseLimit(parsed)
	if err != nil {
		// "limit "100/fortnight": period ...", the core's words without
		// its prefix, naming what the file says.
		msg := strings.TrimPrefix(err.Error(), "ratelimit: invalid ")
		return ratelimit.Limit{}, errors.New(strings.Replace(msg, strconv.Quote(parsed), strconv.Quote(s), 1))
	}
	if zero {
		l.Rate = 0
	}
	return l, nil
}

// parsePeriod parses the period of the long form ({rate: 100, per: min}) as
// the short form's: a unit or a Go duration.
func parsePeriod(s string) (time.Duration, error) {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r == '/' || unicode.IsSpace(r) }) {
		if l, err := ratelimit.ParseLimit("1/" + s); err == nil {
			return l.Period, nil
		}
	}
	return 0, fmt.Errorf("period %q: use s, min, hour, day or a duration such as 30s", s)
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

// logBound reports, at n, a sliding-log limit larger than the log holds
// (see ratelimit.SlidingLog), and whether l is within it.
func (c *compiler) logBound(n *yaml.Node, path string, l ratelimit.Limit) bool {
	req := stores.Request{Limit: l, Algorithm: ratelimit.SlidingLog, Cost: 1}
	if err := req.Validate(); err != nil {
		c.fail(n, path, "%s", strings.TrimPrefix(err.Error(), "ratelimit: invalid limit: "))
		return false
	}
	return true
}
