package memstore

import (
	"math/rand/v2"
	"testing"
)

// TestTableMatchesMap replays random inserts, updates and deletions
// (lookups of absent keys included) on a table and on a Go map, at bounds
// small and large, up to the table's full bound, with hashes crowded into
// few home slots as well as spread, and requires the same contents.
func TestTableMatchesMap(t *testing.T) {
	for _, bound := range []int{1, 3, 16, 100, 2000} {
		for _, crowd := range []bool{false, true} {
			if crowd && bound > 100 {
				continue // one probe run of the whole table: quadratic
			}
			rng := rand.New(rand.NewPCG(uint64(bound), 9))
			tb := newTable[int64](bound)
			ref := map[uint64]int64{}
			key := func() uint64 {
				if crowd { // equal low bits: equal homes, long probe runs
					return uint64(1+rng.IntN(3*bound)) << 40
				}
				return 1 + rng.Uint64N(uint64(3*bound))
			}
			for op := 0; op < 10*bound+200; op++ {
				k := key()
				switch {
				case rng.IntN(3) == 0:
					tb.remove(k)
					delete(ref, k)
				case len(ref) < bound || ref[k] != 0:
					v := rng.Int64N(1000) + 1
					tb.set(k, v)
					ref[k] = v
				}
				if v, ok := tb.get(k); ok != (ref[k] != 0) || v != ref[k] {
					t.Fatalf("bound %d, op %d: get(%d) = %d, %v; map has %d", bound, op, k, v, ok, ref[k])
				}
			}
			if tb.len() != len(ref) {
				t.Fatalf("bound %d: %d entries, map has %d", bound, tb.len(), len(ref))
			}
			for k, v := range ref {
				if got, ok := tb.get(k); !ok || got != v {
					t.Fatalf("bound %d: lost %d (got %d, %v)", bound, k, got, ok)
				}
			}
			if len(tb.keys) > tb.limit {
				t.Fatalf("bound %d: %d slots, limit %d", bound, len(tb.keys), tb.limit)
			}
		}
	}
}

// TestScanDropsEveryExpiredEntry: the full scan, which removes entries while
// it walks the slots, drops every expired entry and keeps every live one,
// including runs that wrap around the end of the table.
func TestScanDropsEveryExpiredEntry(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		sh := &shard[window]{t: newTable[window](200), floor: 0}
		live := map[uint64]bool{}
		for i := 0; i < 150; i++ {
			k := uint64(1+rng.IntN(40))<<32 | uint64(rng.IntN(1<<20)) // crowded homes
			exp := window{Expires: int64(rng.IntN(100))}
			sh.t.set(k, exp)
			live[k] = exp.Expires > 50
		}
		scan(sh, 50)
		for k, want := range live {
			if _, ok := sh.t.get(k); ok != want {
				t.Fatalf("seed %d: key %x present=%v after the scan, want %v", seed, k, ok, want)
			}
		}
		if sh.floor <= 50 {
			t.Fatalf("seed %d: floor %d not above the scan time", seed, sh.floor)
		}
	}
}

// TestSampleFindsAnEntryBeyondAnEmptyRun: a table with entries yields at
// least one to a sample, wherever the sample starts, even past a run of
// empty slots longer than the sample looks at. Eviction relies on it: a
// full shard whose sample came back empty let the new key in without a
// victim, and the table grew past its bound.
func TestSampleFindsAnEntryBeyondAnEmptyRun(t *testing.T) {
	tb := newTable[int64](1000)
	for k := uint64(1); tb.len() < 200; k++ {
		tb.set(k, 1)
	}
	// Keep one entry: every other slot is empty, so most samples start
	// hundreds of slots before it.
	var keep uint64
	for _, k := range tb.keys {
		if k != 0 {
			keep = k
			break
		}
	}
	for _, k := range append([]uint64(nil), tb.keys...) {
		if k != 0 && k != keep {
			tb.remove(k)
		}
	}
	for seed := uint64(1); seed <= 200; seed++ {
		var got []uint64
		tb.sample(seed, 8, func(h uint64, _ int64) bool {
			got = append(got, h)
			return true
		})
		if len(got) != 1 || got[0] != keep {
			t.Fatalf("seed %d: sample of a table holding only %x in %d slots gave %x", seed, keep, len(tb.keys), got)
		}
	}
}
