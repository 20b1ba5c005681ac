package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
)

// memoryStore is the in-process Store: the default of New, and the
// implementation behind stores/memory. It lives here rather than in
// stores/memory because that package imports this one; stores/memory reaches
// it through memstore.Wrap, which init sets.
type memoryStore struct {
	engine *memstore.Store
	clock  Clock
}

var _ Store = (*memoryStore)(nil)

func init() {
	memstore.Wrap = func(e *memstore.Store, clock any) any {
		return &memoryStore{engine: e, clock: clock.(Clock)}
	}
}

func newDefaultStore(clock Clock) *memoryStore {
	return &memoryStore{engine: memstore.New(memstore.Config{}), clock: clock}
}

func (s *memoryStore) Take(_ context.Context, req Request) (Result, error) {
	return s.TakeAt(s.clock.Now(), req)
}

func (s *memoryStore) TakeAll(_ context.Context, reqs []Request, results []Result) error {
	return s.TakeAllAt(s.clock.Now(), reqs, results)
}

func (s *memoryStore) Return(_ context.Context, req Request) error {
	return s.ReturnAt(s.clock.Now(), req)
}

func (s *memoryStore) TakeAt(now time.Time, req Request) (Result, error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	m := toEngine(&req)
	return fromEngine(req.Limit, s.engine.Take(&m, now.UnixNano())), nil
}

func (s *memoryStore) TakeAllAt(now time.Time, reqs []Request, results []Result) error {
	if len(results) != len(reqs) {
		return fmt.Errorf("%w: %d results for %d requests", ErrInvalidRequest, len(results), len(reqs))
	}
	if len(reqs) > memstore.MaxBatch {
		return fmt.Errorf("%w: %d requests in one call, at most %d", ErrInvalidRequest, len(reqs), memstore.MaxBatch)
	}
	var reqBuf [8]memstore.Request
	var resBuf [8]memstore.Result
	ms, res := reqBuf[:0], resBuf[:]
	if len(reqs) > len(reqBuf) {
		ms, res = make([]memstore.Request, 0, len(reqs)), make([]memstore.Result, len(reqs))
	}
	res = res[:len(reqs)]
	for i := range reqs {
		if err := reqs[i].Validate(); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		ms = append(ms, toEngine(&reqs[i]))
	}
	if err := s.engine.TakeAll(ms, res, now.UnixNano()); err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	for i := range res {
		results[i] = fromEngine(reqs[i].Limit, res[i])
	}
	return nil
}

func (s *memoryStore) ReturnAt(now time.Time, req Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	m := toEngine(&req)
	s.engine.Return(&m, now.UnixNano())
	return nil
}

func (s *memoryStore) Len() int { return s.engine.Len() }

func toEngine(r *Request) memstore.Request {
	return memstore.Request{
		Rule: r.Rule,
		Key:  r.Key,
		Alg:  memstore.Alg(r.Algorithm),
		Limit: memstore.Limit{
			Rate:     int64(r.Limit.Rate),
			Period:   int64(r.Limit.Period),
			Capacity: int64(r.Limit.Capacity()),
			Interval: int64(r.Limit.Interval()),
		},
		Cost:     int64(r.Cost),
		WinStart: r.Window.Start,
		WinEnd:   r.Window.End,
		WinNext:  r.Window.NextEnd,
		Slot:     r.Slot,
	}
}

func fromEngine(l Limit, r memstore.Result) Result {
	return Result{
		Allowed:    r.Allowed,
		Limit:      l,
		Remaining:  int(r.Remaining),
		RetryAfter: time.Duration(r.RetryAfter),
		ResetAfter: time.Duration(r.ResetAfter),
		Slot:       r.Slot,
	}
}

// Local reports that the store answers from process memory; see LocalStore.
func (s *memoryStore) Local() bool { return true }
