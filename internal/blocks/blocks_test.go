package blocks

import (
	"sync"
	"testing"
)

func TestGetNeverReturnsAValueTwice(t *testing.T) {
	p := New[[4]int](8)
	seen := make(map[*[4]int]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				v := p.Get()
				if *v != ([4]int{}) {
					t.Errorf("Get returned a value in use: %v", *v)
				}
				v[0] = 1
				mu.Lock()
				if seen[v] {
					t.Errorf("Get returned %p twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestGetAllocatesOncePerBlock(t *testing.T) {
	p := New[[16]byte](64)
	p.Get() // a block in the pool
	allocs := testing.AllocsPerRun(6400, func() { p.Get() })
	// Two allocations (the block and its values) a block of 64; a GC that
	// empties the pool costs a block more.
	if allocs > 0.1 {
		t.Fatalf("Get: %v allocations a call, want at most 2 a block of 64", allocs)
	}
}

func TestNewPanicsOnASizeBelowOne(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("New(0) did not panic")
		}
	}()
	New[int](0)
}
