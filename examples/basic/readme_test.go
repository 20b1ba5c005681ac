package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// The README's quick start, and the claims the README makes about what a
// limit admits, are checked here so that the text cannot go stale.

// quickStart is the limiter of the README's quick start.
func quickStart(opts ...ratelimit.Option) func(http.Handler) http.Handler {
	return ratelimit.New(ratelimit.PerMinute(100).WithBurst(20), ratelimit.ByIP(), opts...)
}

// render writes a response as the README shows it: status line, headers in
// name order (Date and Content-Length, which vary, left out), blank line,
// body.
func render(resp *ratelimittest.Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", resp.Code, http.StatusText(resp.Code))
	names := make([]string, 0, len(resp.Header))
	for name := range resp.Header {
		if name != "Date" && name != "Content-Length" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range resp.Header[name] {
			fmt.Fprintf(&b, "%s: %s\n", name, v)
		}
	}
	fmt.Fprintf(&b, "\n%s", strings.TrimRight(resp.Body, "\n"))
	return b.String()
}

// readmeBlock returns the fenced block, opened by fence, that follows marker
// in the README.
func readmeBlock(t *testing.T, marker, fence string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("no README beside the module: %v", err)
	}
	_, after, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	_, after, _ = strings.Cut(after, fence)
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("README.md: no fenced block after %q", marker)
	}
	return strings.TrimRight(block, "\n")
}

func TestReadmeSample429IsWhatTheQuickStartSends(t *testing.T) {
	want := readmeBlock(t, "<!-- sample-429", "```http\n")
	for name, h := range map[string]func(clock ratelimit.Clock) http.Handler{
		"the quick start": func(clock ratelimit.Clock) http.Handler {
			return quickStart(ratelimit.WithClock(clock))(http.NotFoundHandler())
		},
		"go run ./examples/basic": func(clock ratelimit.Clock) http.Handler {
			return newHandler(ratelimit.WithClock(clock))
		},
	} {
		h := h(ratelimittest.NewClock(time.Time{}))
		req := func() *http.Request { return ratelimittest.NewRequest("GET", "/hello", "203.0.113.7:4711") }
		resp := ratelimittest.ExpectLimitedAt(t, h, 21, req) // the burst of 20, then a 429
		if got := render(resp); got != want {
			t.Errorf("the README's sample 429 is stale; %s sends:\n%s\n\nthe README shows:\n%s", name, got, want)
		}
	}
}

// TestReadmeQuickStartIsThisExample: the first screen's program serves
// GET /hello under the limit this example (and quickStart) applies.
func TestReadmeQuickStartIsThisExample(t *testing.T) {
	code := readmeBlock(t, "<!-- quick-start", "```go\n")
	for _, want := range []string{
		`mux.HandleFunc("GET /hello", `,
		`ratelimit.New(ratelimit.PerMinute(100).WithBurst(20), ratelimit.ByIP())`,
		`http.ListenAndServe(":8080", limit(mux))`,
	} {
		if !strings.Contains(code, want) {
			t.Errorf("the README's quick start no longer holds %s; update examples/basic to match it:\n%s", want, code)
		}
	}
}

// maxInAnyMinute offers one request every 20ms from one client for three
// minutes, starting 30s into a clock-aligned minute, and returns the
// requests admitted in the first minute and the most admitted in any
// minute [t, t+1m).
func maxInAnyMinute(t *testing.T, limit ratelimit.Limit, alg ratelimit.Algorithm) (first, most int) {
	t.Helper()
	clock := ratelimittest.NewClock(time.Time{}) // a whole number of minutes after the epoch
	start := clock.Now().Add(30 * time.Second)
	h := ratelimit.NewRules([]ratelimit.Rule{{Limit: limit, Key: ratelimit.ByIP(), Algorithm: alg}}, ratelimit.WithClock(clock))(http.NotFoundHandler())
	var admitted []time.Duration
	for at := time.Duration(0); at < 3*time.Minute; at += 20 * time.Millisecond {
		clock.Set(start.Add(at))
		if !ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1")).Limited() {
			admitted = append(admitted, at)
		}
	}
	j := 0
	for i, at := range admitted {
		for admitted[j] <= at-time.Minute {
			j++
		}
		most = max(most, i-j+1)
		if at < time.Minute {
			first = i + 1
		}
	}
	return first, most
}

func TestPerMinuteAdmitsItsBurstPlusItsRateToAFreshClient(t *testing.T) {
	first, most := maxInAnyMinute(t, ratelimit.PerMinute(100), ratelimit.GCRA)
	// 100 at once, then one every 600ms: 99 more before the minute is over.
	if first != 199 || most != 199 {
		t.Fatalf("PerMinute(100): %d in the first minute, at most %d in any minute; the README says 199", first, most)
	}
}

func TestStrictAtMostNInAnyMinute(t *testing.T) {
	for _, tc := range []struct {
		limit ratelimit.Limit
		want  int
	}{
		{ratelimit.PerMinute(100).WithBurst(1), 100},  // no burst: an even 100 a minute
		{ratelimit.PerMinute(81).WithBurst(20), 100},  // Burst + Rate - 1 = 100
		{ratelimit.PerMinute(100).WithBurst(20), 119}, // the quick start: not strict
	} {
		if _, most := maxInAnyMinute(t, tc.limit, ratelimit.GCRA); most != tc.want {
			t.Errorf("%+v: at most %d in any minute, want %d", tc.limit, most, tc.want)
		}
	}
	// FixedWindow: at most Rate per clock-aligned minute, but up to twice
	// Rate in a minute that straddles two windows: 100 at :30 and 100 at
	// the next :00.
	if _, most := maxInAnyMinute(t, ratelimit.PerMinute(100), ratelimit.FixedWindow); most != 200 {
		t.Errorf("FixedWindow PerMinute(100): at most %d in any minute, want 200", most)
	}
}

// TestReadmeStaysShortAndLinksEveryDocsPage: deep material belongs in
// docs/, and a reader finds every page of it from the README.
func TestReadmeStaysShortAndLinksEveryDocsPage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("no README beside the module: %v", err)
	}
	if len(readme) > 32*1024 {
		t.Errorf("README.md is %d bytes, over 32 KB: move deep material to docs/", len(readme))
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	for _, page := range pages {
		if link := "](docs/" + filepath.Base(page); !strings.Contains(string(readme), link) {
			t.Errorf("README.md does not link %s", filepath.Base(page))
		}
	}
}

// TestReadmeRulesFileCompiles: the rules file the README shows, match:
// included, is one the config module accepts.
func TestReadmeRulesFileCompiles(t *testing.T) {
	file := readmeBlock(t, "<!-- rules-file", "```yaml\n")
	reg := &config.Registry{Keys: map[string]ratelimit.KeyFunc{"client_ip": ratelimit.ByClientIP("10.0.0.0/8")}}
	if _, err := config.Parse("README.md", []byte(file), reg); err != nil {
		t.Fatalf("the README's rules file does not compile:\n%v", err)
	}
}
