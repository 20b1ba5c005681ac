package memstore

import (
	"strconv"
	"testing"
)

// holeIn gives key a hole: two reservations, the first given back while
// the second waits (see gcraholes.go).
func holeIn(t *testing.T, s *Store, key string) {
	t.Helper()
	r := Request{Alg: GCRA, Key: key, Limit: Limit{Rate: 1, Period: 1e9, Capacity: 1}, Cost: 1, MaxDelay: 1e12}
	first := s.Take(&r, 0)
	if second := s.Take(&r, 0); !first.Allowed || !second.Allowed {
		t.Fatalf("key %s: reservations %+v, %+v", key, first, second)
	}
	r.Slot = first.Slot
	s.Return(&r, 0)
}

// TestDroppedGCRAKeyTakesItsHolesWithIt: the holes of a GCRA key go when
// its state goes, deleted or evicted: a store of evicted keys does not keep
// their holes (up to 65,536 a shard, 230 bytes each, whatever its bound),
// and a key named again starts without the old key's turns.
func TestDroppedGCRAKeyTakesItsHolesWithIt(t *testing.T) {
	s := New(Config{MaxKeys: 1024, Shards: 1})
	holeIn(t, s, "deleted")
	if n := s.gcra[0].nholes; n != 1 {
		t.Fatalf("%d holes after a middle refund, want 1", n)
	}
	s.Delete(&Request{Alg: GCRA, Key: "deleted"})
	if n, m := s.gcra[0].nholes, len(s.gcra[0].holes); n != 0 || m != 0 {
		t.Fatalf("%d holes of %d keys after Delete, want none", n, m)
	}
	for i := range 4096 {
		holeIn(t, s, strconv.Itoa(i))
	}
	live := s.Len()
	if n, m := s.gcra[0].nholes, len(s.gcra[0].holes); n > live || m > live {
		t.Fatalf("%d holes of %d keys in a store of %d keys, after 4,096 keys with one each", n, m, live)
	}
}
