package ratelimitclient

import (
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// maxPartitions bounds the partitions a Transport keeps. Beyond it, idle
// partitions are forgotten: requests to hosts (or with credentials) without
// end cannot grow memory without end.
const maxPartitions = 10_000

// credentialHeaders are the request fields hashed into the default
// partition: requests with different credentials have different quotas.
var credentialHeaders = [...]string{"Authorization", "X-Api-Key"}

// partKey identifies a partition without allocating: the request's scheme
// and host and a hash of its credentials, or the string Transport.Partition
// returned (with custom set).
type partKey struct {
	scheme, host string
	cred         uint64
	custom       bool
}

// partition is the rate-limit state of one partition.
type partition struct {
	name    string
	key     partKey
	evicted atomic.Bool   // no longer in the table: not to be taken from Transport.last
	count   atomic.Uint64 // sends admitted: each send's sequence number
	gated   atomic.Bool   // some state may delay a send: take the slow path
	budget  atomic.Int64  // retry budget, in thousandths of a retry
	clock   serverClock   // the server's clock, for absolute times
	fields  fieldCaches   // the IETF fields parsed last

	mu       sync.Mutex
	blocked  mono          // no send before this (a 429 or 503's Retry-After)
	policies []policy      // per server policy name
	scratch  []policy      // plan's result, committed into policies
	local    *rate.Limiter // the local limit, nil when none
	localAt  mono          // the latest time given to local (see localTime)
	rate     float64       // adaptive mode: the current local rate, per second
	ad       *adaptState   // adaptive mode: what it read from the server, nil outside it
	seen     seenFields    // the fields of the response applied last (see repeated.go)
	log      *sendLog      // the latest sends, once a policy's quota fits it (see sendlog.go)
	waiters  []*waiter     // sends waiting for their slot (see replan.go)
	work     waitWork      // what the waiting sends cost under mu (see replan.go)
}

// adaptState is what the adaptive mode reads from a server without fields.
type adaptState struct {
	learn    learner  // the rate the server accepts (see learn.go)
	sched    schedule // the windows of a server read to count in fixed ones
	schedNew schedule // plan's result, committed into sched
}

// table maps keys to partitions, in shards so that concurrent requests to
// different partitions rarely share a lock.
type table struct {
	shards [numShards]shard
}

const numShards = 16

type shard struct {
	mu sync.RWMutex
	m  map[partKey]*partition
	_  [40]byte // keep shards on separate cache lines
}

func (t *Transport) key(req *http.Request) partKey {
	if t.Partition != nil {
		return partKey{host: t.Partition(req), custom: true}
	}
	k := partKey{scheme: req.URL.Scheme, host: req.URL.Host}
	if len(req.Header) == 0 && req.URL.User == nil {
		return k
	}
	for _, h := range credentialHeaders {
		if v := req.Header[h]; len(v) > 0 {
			k.cred = k.cred*31 + maphash.String(t.seed, v[0])
		}
	}
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		k.cred = k.cred*31 + maphash.String(t.seed, u.Username()) ^ maphash.String(t.seed, pw)
	}
	return k
}

// partition returns the partition of req, creating it on first use.
func (t *Transport) partition(req *http.Request) *partition {
	k := t.key(req)
	// Most clients call one host with one credential: comparing the key
	// with the last partition's costs less than hashing it.
	if p := t.last.Load(); p != nil && p.key == k && !p.evicted.Load() {
		return p
	}
	p := t.lookup(k)
	t.last.Store(p)
	return p
}

// lookup returns the partition of k, creating it on first use.
func (t *Transport) lookup(k partKey) *partition {
	sh := &t.parts.shards[maphash.Comparable(t.seed, k)%numShards]
	sh.mu.RLock()
	p := sh.m[k]
	sh.mu.RUnlock()
	if p != nil {
		return p
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p = sh.m[k]; p != nil {
		return p
	}
	if sh.m == nil {
		sh.m = make(map[partKey]*partition)
	}
	if len(sh.m) >= maxPartitions/numShards {
		evict(sh.m, maxPartitions/numShards, t.now())
	}
	name := k.host
	if !k.custom {
		name = k.scheme + "://" + k.host
	}
	p = &partition{name: name, key: k, clock: serverClock{epoch: t.epoch}, local: t.newLocal()}
	p.budget.Store(1000) // one retry before any request has paid for it
	if p.local != nil {
		if t.Adaptive {
			p.rate = float64(p.local.Limit())
			p.ad = new(adaptState)
		}
		p.gated.Store(true)
	}
	sh.m[k] = p
	return p
}

// evict forgets partitions of m that are not blocked at now, down to 7/8 of
// limit.
func evict(m map[partKey]*partition, limit int, now mono) {
	for k, p := range m {
		if len(m) < limit*7/8 {
			return
		}
		p.mu.Lock()
		busy := p.blocked > now
		p.mu.Unlock()
		if !busy {
			p.evicted.Store(true)
			delete(m, k)
		}
	}
	for k, p := range m { // all blocked: forget some anyway
		if len(m) < limit*7/8 {
			return
		}
		p.evicted.Store(true)
		delete(m, k)
	}
}

// deposit adds n thousandths to the retry budget, up to limit.
func (p *partition) deposit(n, limit int64) {
	for {
		old := p.budget.Load()
		v := min(old+n, limit)
		if v == old || p.budget.CompareAndSwap(old, v) {
			return
		}
	}
}

// spend takes one retry from the budget, reporting whether there was one.
func (p *partition) spend() bool {
	for {
		old := p.budget.Load()
		if old < 1000 {
			return false
		}
		if p.budget.CompareAndSwap(old, old-1000) {
			return true
		}
	}
}
