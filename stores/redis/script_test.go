package redisstore

import (
	"context"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// TestLuaMulDiv runs the script's exact arithmetic on the server against
// math/big, on random and adversarial operands: products up to 2^84 whose
// quotient is an integer, or one above or below an integer by a unit.
func TestLuaMulDiv(t *testing.T) {
	client := standaloneClient(t)
	begin := strings.Index(scriptSource, "-- BEGIN ARITHMETIC")
	end := strings.Index(scriptSource, "-- END ARITHMETIC")
	if begin < 0 || end < begin {
		t.Fatal("arithmetic markers missing from script.lua")
	}
	harness := scriptSource[begin:end] + `
local out = {}
for i = 1, #ARGV, 3 do
  local a, b, c = tonumber(ARGV[i]), tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
  local q, r = muldiv(a, b, c)
  out[#out+1] = string.format("%.0f %.0f %.0f", q, r, muldivceil(a, b, c))
end
return out`

	rng := rand.New(rand.NewPCG(1, 2))
	const maxCount = 1<<31 - 1
	type tc struct{ a, b, c int64 }
	var cases []tc
	add := func(a, b, c int64) {
		// The script's contract: a <= 2^31, b < 2^53, quotient < 2^53, and
		// the quotient or c at most 2^31.
		q := new(big.Int).Div(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(c))
		if a <= 1<<31 && b < 1<<53 && c >= 1 && q.IsInt64() && q.Int64() < 1<<53 && (q.Int64() <= 1<<31 || c <= 1<<31) {
			cases = append(cases, tc{a, b, c})
		}
	}
	for range 3000 {
		a := rng.Int64N(maxCount + 1)
		switch rng.IntN(3) {
		case 0: // weighted count: c = period, b < c
			c := 1 + rng.Int64N(1<<52)
			add(a, rng.Int64N(c), c)
		case 1: // retry: c a count, quotient < b
			c := 1 + rng.Int64N(maxCount)
			add(min(a, c-1), 1+rng.Int64N(1<<52), c)
		default: // adversarial: quotients at or next to an integer
			c := 1 + rng.Int64N(1<<52)
			b := rng.Int64N(c)
			if a == 0 || b == 0 {
				continue
			}
			// Nudge b so that a*b mod c is tiny or c-1.
			prod := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
			r := new(big.Int).Mod(prod, big.NewInt(c)).Int64()
			add(a, b, c)
			if r > 0 {
				// c2 = (a*b-r)/q, when exact, divides a*b with remainder r:
				// the quotient is an integer plus r/c2, and c2+1 gives one
				// just below an integer.
				q := new(big.Int).Div(prod, big.NewInt(c))
				if q.Sign() > 0 {
					base := new(big.Int).Sub(prod, big.NewInt(r))
					c2 := new(big.Int).Div(base, q)
					if new(big.Int).Mul(c2, q).Cmp(base) == 0 && c2.IsInt64() {
						add(a, b, c2.Int64())   // exact quotient, remainder r
						add(a, b, c2.Int64()+1) // just below
					}
				}
			}
		}
	}
	// Hand-picked edges.
	add(maxCount, 1<<53-1, 1<<52+1)
	add(maxCount, 1<<53-1, maxCount)
	add(1<<31, 1<<53-1, 1<<31)
	add(999_983, 86_400_000_000-1, 86_400_000_000)
	add(1, 1, 1)
	add(0, 5, 3)

	for start := 0; start < len(cases); start += 500 {
		batch := cases[start:min(len(cases), start+500)]
		args := make([]any, 0, 3*len(batch))
		for _, c := range batch {
			args = append(args, c.a, c.b, c.c)
		}
		out, err := client.Eval(context.Background(), harness, nil, args...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range batch {
			prod := new(big.Int).Mul(big.NewInt(c.a), big.NewInt(c.b))
			q, r := new(big.Int).QuoRem(prod, big.NewInt(c.c), new(big.Int))
			ceil := new(big.Int).Set(q)
			if r.Sign() > 0 {
				ceil.Add(ceil, big.NewInt(1))
			}
			want := q.String() + " " + r.String() + " " + ceil.String()
			if out[i] != want {
				t.Errorf("muldiv(%d, %d, %d) = %q, want %q", c.a, c.b, c.c, out[i], want)
			}
		}
	}
	t.Logf("%d cases", len(cases))
}

// TestSlidingWindowRoundingEdge builds, on a PerDay(1,000,000) window and
// on a century window of 2^31-1 events, the instants at which the weighted
// count prev*(P-e)/P lies one or seven units above an integer, a difference
// that a double product of that size (beyond 2^53) rounds away, and
// compares with the memory store at those microsecond instants.
func TestSlidingWindowRoundingEdge(t *testing.T) {
	ctx := context.Background()
	client := standaloneClient(t)
	cases := []struct {
		limit stores.Limit
		prev  int
	}{
		{ratelimit.PerDay(1_000_000), 999_983},
		{stores.Limit{Rate: 1<<31 - 1, Period: 50 * 365 * 24 * time.Hour}, 1<<31 - 1},
	}
	for _, c := range cases {
		for _, r := range []int64{1, 7} {
			t.Run(c.limit.String()+"/r"+strconv.FormatInt(r, 10), func(t *testing.T) {
				p := int64(c.limit.Period / time.Microsecond)
				// d with prev*d ≡ r (mod p), so that prev*d/p is r/p above an integer.
				inv := new(big.Int).ModInverse(big.NewInt(int64(c.prev)), big.NewInt(p))
				if inv == nil {
					t.Fatal("prev and period not coprime")
				}
				d := new(big.Int).Mod(new(big.Int).Mul(inv, big.NewInt(r)), big.NewInt(p)).Int64()

				clock := ratelimittest.NewClock(time.Time{})
				mem := memory.New(memory.WithClock(clock))
				rs := newStore(client, WithClock(clock), WithPrefix(uniquePrefix(t)))
				req := withAlg(gcraReq("edge", c.limit, c.prev), stores.SlidingWindow)

				nowUS := clock.Now().UnixMicro()
				start := nowUS - nowUS%p // this window's start (1970 for a century)
				take := func(atUS int64, cost int) stores.Result {
					t.Helper()
					req.Cost = cost
					at := time.UnixMicro(atUS)
					want, err := mem.TakeAt(at, req)
					if err != nil {
						t.Fatal(err)
					}
					got, err := rs.TakeAt(ctx, at, req)
					if err != nil {
						t.Fatal(err)
					}
					if !sameSlot(req.Algorithm, got.Slot, want.Slot) {
						t.Fatalf("cost %d: Slot %d, memory %d", cost, got.Slot, want.Slot)
					}
					got.Slot, want.Slot = 0, 0
					want.NextAfter = ceilMicro(want.NextAfter) // in µs here
					if !want.Allowed {
						want.NextAfter = 0 // reported on allowed takes alone
					}
					if got != want {
						t.Fatalf("cost %d at window offset %dµs:\n redis  %+v\n memory %+v", cost, atUS%p, got, want)
					}
					return got
				}
				take(start, c.prev)
				// In the next window at e = p-d the previous count weighs
				// ceil(prev*d/p), which is floor+1 because of the remainder r.
				at := start + p + (p - d)
				wantWeighted := new(big.Int).Div(new(big.Int).Mul(big.NewInt(int64(c.prev)), big.NewInt(d)), big.NewInt(p)).Int64() + 1
				res := take(at, 0)
				if want := int64(c.limit.Rate) - wantWeighted; int64(res.Remaining) != want {
					t.Fatalf("remaining %d, want %d", res.Remaining, want)
				}
				take(at, 1)
			})
		}
	}
}
