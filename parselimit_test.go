package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

func TestParseLimitReadsTheShortForm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ratelimit.Limit
	}{
		{"100/min", ratelimit.PerMinute(100)},
		{"100/min burst 20", ratelimit.PerMinute(100).WithBurst(20)},
		{"  10/s   burst 1 ", ratelimit.PerSecond(10).WithBurst(1)},
		{"5/30s", ratelimit.Limit{Rate: 5, Period: 30 * time.Second}},
		{"7/1m30s", ratelimit.Limit{Rate: 7, Period: 90 * time.Second}},
		{"1000/day", ratelimit.PerDay(1000)},
		{"3/hour", ratelimit.PerHour(3)},
		{"100/1m0s", ratelimit.PerMinute(100)}, // what Limit.String writes
		{"010/sec", ratelimit.PerSecond(10)},
	} {
		got, err := ratelimit.ParseLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLimitRejectsWhatCannotBeEnforced(t *testing.T) {
	for _, tc := range []struct{ in, says string }{
		{"", "want <n>/<period>"},
		{"100 per minute", "want <n>/<period>"},
		{"100", "want <n>/<period>"},
		{"100/min burst", "want <n>/<period>"},
		{"100/min rate 5", "want <n>/<period>"},
		{"-1/min", `"-1" is not a count`},
		{"+1/min", `"+1" is not a count`},
		{"1e3/min", `"1e3" is not a count`},
		{"99999999999999999999/min", "is not a count"},
		{"100/fortnight", `period "fortnight"`},
		{"100/-1s", `period "-1s"`},
		{"100/0s", `period "0s"`},
		{"100/min burst x", `burst "x" is not a count`},
		{"0/min", "rate 0 must be positive"},
		{"2000000000/s", "faster than"},
		{"3000000000/day", "exceeds the maximum"},
		{"1/500000h", "longer than"},
	} {
		l, err := ratelimit.ParseLimit(tc.in)
		if err == nil {
			t.Errorf("ParseLimit(%q) = %+v, want an error", tc.in, l)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ratelimit.ErrInvalidLimit) || !strings.HasPrefix(msg, "ratelimit: ") ||
			!strings.Contains(msg, fmt.Sprintf("%q", tc.in)) || !strings.Contains(msg, tc.says) {
			t.Errorf("ParseLimit(%q): %q; want an ErrInvalidLimit naming the input and saying %q", tc.in, msg, tc.says)
		}
		if l != (ratelimit.Limit{}) {
			t.Errorf("ParseLimit(%q) returned %+v with its error", tc.in, l)
		}
	}
}

// FuzzParseLimit: any input gives a valid Limit or an ErrInvalidLimit,
// never a panic, and a valid Limit reads back from its String.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"100/min", "10/s burst 20", "5/1m30s", "0/min", "1/1ns", "1/500000h", "100 per minute", "9/d burst 9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ratelimit.ParseLimit(s)
		if err != nil {
			if !errors.Is(err, ratelimit.ErrInvalidLimit) || !strings.HasPrefix(err.Error(), "ratelimit: ") {
				t.Fatalf("ParseLimit(%q): error %q does not wrap ErrInvalidLimit", s, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLimit(%q) = %+v, which is invalid: %v", s, l, err)
		}
		again, err := ratelimit.ParseLimit(l.String())
		if err != nil || again.Rate != l.Rate || again.Period != l.Period || again.Capacity() != l.Capacity() {
			t.Fatalf("ParseLimit(%q) = %+v, but its String %q reads back as %+v, %v", s, l, l.String(), again, err)
		}
	})
}

func ExampleParseLimit() {
	for _, s := range []string{"100/min burst 20", "5/30s", "100/fortnight"} {
		l, err := ratelimit.ParseLimit(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%d per %v, at most %d at once\n", l.Rate, l.Period, l.Capacity())
	}
	// Output:
	// 100 per 1m0s, at most 20 at once
	// 5 per 30s, at most 5 at once
	// ratelimit: invalid limit "100/fortnight": period "fortnight": use s, min, hour, day or a duration such as 30s
}
