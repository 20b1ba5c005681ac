package config

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// entryMatches is what a rule's own match says of (method, path).
func entryMatches(e entry, method, p string) bool {
	if e.methods != 0 && !e.takes(methodClass(method)) {
		return false
	}
	if e.routes == nil {
		return true
	}
	for _, r := range e.routes {
		if ok, _ := routeMatch(r, p); ok {
			return true
		}
	}
	return false
}

// exact reports whether the index decides e's routes exactly (no glob
// segment other than a bare "*").
func exact(e entry) bool {
	for _, r := range e.routes {
		for _, seg := range strings.Split(r, "/") {
			if hasMeta(seg) && seg != "*" {
				return false
			}
		}
	}
	return true
}

// TestIndexGroupHoldsEveryRuleThatMatches routes random requests through
// the index of random route patterns: the group of a request must hold
// every rule whose match says yes, and no rule whose routes the index
// decides exactly and whose match says no.
func TestIndexGroupHoldsEveryRuleThatMatches(t *testing.T) {
	segs := []string{"api", "v1", "v2", "users", "x", "", "a.json"}
	pats := []string{"api", "v1", "v2", "users", "*", "v*", "*.json", "[uv]?"}
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var ents []entry
		for range 1 + rng.IntN(30) {
			var e entry
			if rng.IntN(4) > 0 {
				for range 1 + rng.IntN(2) {
					var b strings.Builder
					for range 1 + rng.IntN(3) {
						b.WriteString("/" + pats[rng.IntN(len(pats))])
					}
					if rng.IntN(3) == 0 {
						b.WriteString("/*")
					}
					e.routes = append(e.routes, b.String())
				}
			}
			if rng.IntN(3) == 0 {
				e.methods = 1<<2 | 1<<3 // POST, PUT
			}
			ents = append(ents, e)
		}
		x, groups, err := buildIndex(ents)
		if err != nil {
			t.Fatal(err)
		}
		for range 300 {
			var b strings.Builder
			for range rng.IntN(5) {
				b.WriteString("/" + segs[rng.IntN(len(segs))])
			}
			p := b.String()
			if p == "" && rng.IntN(2) == 0 {
				p = "/"
			}
			method := []string{"GET", "POST", "PROPFIND"}[rng.IntN(3)]
			r := httptest.NewRequest(method, "/", nil)
			r.URL.Path = p
			g, _ := x.walk(methodClass(r.Method), r.URL.Path)
			var in []int32
			if g >= 0 {
				in = groups[g].entries
			}
			for i, e := range ents {
				want := entryMatches(e, method, p)
				got := slices.Contains(in, int32(i))
				if want && !got {
					t.Fatalf("seed %d: %s %q matches %+v but its group %v lacks it", seed, method, p, e, in)
				}
				if !want && got && exact(e) {
					t.Fatalf("seed %d: %s %q does not match %+v but its group %v holds it", seed, method, p, e, in)
				}
			}
		}
	}
}

// TestIndexOfAThousandRoutesStaysSmall checks the index of 1,000 rules on
// distinct subtrees: one group per rule, and a few states per rule.
func TestIndexOfAThousandRoutesStaysSmall(t *testing.T) {
	var ents []entry
	for i := range 1000 {
		ents = append(ents, entry{routes: []string{fmt.Sprintf("/api/v%d/*", i)}})
	}
	ents = append(ents, entry{}) // a rule on every request
	x, groups, err := buildIndex(ents)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1001 || len(x.states) > 3*1000+10 {
		t.Fatalf("%d groups, %d states", len(groups), len(x.states))
	}
}

// TestIndexRejectsRoutesThatCombineWithoutBound: routes whose literal can
// sit at any of n positions among wildcards make 2^n path classes; the
// index gives up at maxStates instead of building them all.
func TestIndexRejectsRoutesThatCombineWithoutBound(t *testing.T) {
	const n = 20
	var ents []entry
	for i := range n {
		ents = append(ents, entry{routes: []string{"/" + strings.Repeat("*/", i) + "a" + strings.Repeat("/*", n-1-i)}})
	}
	if _, _, err := buildIndex(ents); err == nil || !strings.Contains(err.Error(), "path classes") {
		t.Fatalf("err %v, want the path classes bound", err)
	}
	if _, _, err := buildIndex(ents[:8]); err != nil { // 2^8 classes are fine
		t.Fatal(err)
	}
}

// TestIndexStopsEarlyOnAFileOverTheBound: 2,000 limited rules on every
// request with 10,000 distinct routes put every one of 10,000 groups over
// the bound; the index stops after maxOverGroups of them instead of
// building all (7 s and 240 MB for the 0.8 MB file), and Parse still
// reports the rule that crosses the bound. The same holds for unlimited
// rules (2,000 of them on every path compiled in 5 s to 560 MB, then ran
// every predicate on every request).
func TestIndexStopsEarlyOnAFileOverTheBound(t *testing.T) {
	var ents []entry
	for range 2000 {
		ents = append(ents, entry{limited: true})
	}
	for i := range 10000 {
		ents = append(ents, entry{routes: []string{fmt.Sprintf("/x%d", i)}, limited: true})
	}
	_, groups, err := buildIndex(ents)
	if !errors.Is(err, errOverBound) || len(groups) > maxOverGroups+1 {
		t.Fatalf("err %v with %d groups, want errOverBound within %d groups", err, len(groups), maxOverGroups+1)
	}
	// Unlimited rules count against a bound of their own: as many of them
	// on every request stop the index as early.
	for i := range ents[:2000] {
		ents[i].limited = false
	}
	if _, groups, err := buildIndex(ents); !errors.Is(err, errOverBound) || len(groups) > maxOverGroups+1 {
		t.Fatalf("unlimited: err %v with %d groups, want errOverBound within %d groups", err, len(groups), maxOverGroups+1)
	}
	// Up to the bound of each kind, a request's group is fine.
	bounded := append(slices.Clone(ents[:maxRules]), ents[2000:2000+maxRules]...)
	for i := range bounded[maxRules:] {
		bounded[maxRules+i].routes = nil
	}
	if _, _, err := buildIndex(bounded); err != nil {
		t.Fatal(err)
	}
}
