package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
)

func TestLoadTestShort(t *testing.T) {
	h := ratelimit.New(ours(Unlimited), ratelimit.ByIP())(OK)
	r, err := LoadTest("sluicehq", h, 4, 50*time.Millisecond, 200*time.Millisecond, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Requests > 1000 || r.Errors > 0 || r.Non200 > 0 || r.P99 < r.P50 {
		t.Fatalf("%+v", r)
	}
	t.Logf("%+v", r)
}
