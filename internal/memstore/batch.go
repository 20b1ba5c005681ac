package memstore

import "fmt"

// TakeBatch is TakeAll for a front end with its own request and result
// types: it converts each request with conv (which validates it), takes them
// all at now and converts each result back with back. A request conv
// rejects fails the batch with its index; a length mismatch or more than
// MaxBatch requests, or a forced request, fails it with invalid, before any
// state is touched.
func TakeBatch[R, S any](s *Store, now int64, reqs []R, results []S, invalid error,
	conv func(*R) (Request, error), back func(*R, Result) S) error {
	if len(results) != len(reqs) {
		return fmt.Errorf("%w: %d results for %d requests", invalid, len(results), len(reqs))
	}
	if len(reqs) > MaxBatch {
		return fmt.Errorf("%w: %d requests in one call, at most %d", invalid, len(reqs), MaxBatch)
	}
	var reqBuf [8]Request
	var resBuf [8]Result
	ms, res := reqBuf[:0], resBuf[:]
	if len(reqs) > len(reqBuf) {
		ms, res = make([]Request, 0, len(reqs)), make([]Result, len(reqs))
	}
	res = res[:len(reqs)]
	for i := range reqs {
		m, err := conv(&reqs[i])
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		if m.Force {
			return fmt.Errorf("%w: request %d: a forced request (a settlement) is taken alone, with Take", invalid, i)
		}
		ms = append(ms, m)
	}
	if err := s.TakeAll(ms, res, now); err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	for i := range res {
		results[i] = back(&reqs[i], res[i])
	}
	return nil
}
