package memstore

// Delete drops the state of r's (rule, key, algorithm), if any.
func (s *Store) Delete(r *Request) {
	h := s.hash(r)
	i := s.index(h)
	switch r.Alg {
	case GCRA:
		sh := &s.gcra[i]
		sh.mu.Lock()
		sh.drop(h)
		sh.mu.Unlock()
	case Concurrency:
		sh := &s.conc[i]
		sh.mu.Lock()
		sh.demoteKey(h)
		sh.t.remove(h)
		sh.mu.Unlock()
	case SlidingLog:
		sh := &s.logs[s.logIndex(h)]
		sh.mu.Lock()
		sh.drop(h)
		sh.mu.Unlock()
	default:
		sh := &s.windows[i]
		sh.lockFor(h)
		sh.t.remove(h)
		sh.mu.Unlock()
	}
}
