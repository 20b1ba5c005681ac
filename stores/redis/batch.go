package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/ratelimit/stores"
)

// Coalescing. Each Take and Return becomes an op. Up to maxInFlight script
// calls of one lane (the set of keys one script call may touch: the whole
// server, a Cluster slot, or a Ring hash tag) run at once. While fewer than
// that are in flight and no batch is (so nothing is queued either), an op
// is sent at once by its caller, alone, with the caller's ctx, exactly as
// without coalescing: a batch only forms when no call could start anyway.
// Other ops queue. A call that returns while ops are queued hands its place
// to a short-lived goroutine (a flusher) that sends everything queued as
// one script call in mode "i", batch after batch until the queue is empty,
// then exits. At most batchCap flushers run at once; a solo call that
// returns while they do gives its place up. So under light load every
// check travels alone, and under heavy load the lane settles on batchCap
// batches in flight, Redis working on one while the other is on the wire.
// No goroutine outlives the work: a Store needs no Close.

type opKind uint8

const (
	opTake opKind = iota
	opReturn
	opLease // a GCRA take that also leases up to n units
)

// op is one check on its way to Redis.
type op struct {
	ctx  context.Context
	key  string // state key
	req  stores.Request
	kind opKind
	n    int // opLease: the most units to take in all
	now  instant

	vals [takeWidth]int64 // the reply: code, remaining, retry µs, reset µs, token
	err  error
	done chan struct{} // receives once when vals and err are set (queued ops)
}

var opPool = sync.Pool{New: func() any { return &op{done: make(chan struct{}, 1)} }}

// lane gathers the script calls of one group of keys: at most maxInFlight
// are in flight, and ops queue behind them.
type lane struct {
	mu       *sync.Mutex // the lane's own, or its shard's
	id       string
	shard    *laneShard // nil for the single lane of a one-node client
	queue    []*op
	inflight int // calls on the wire, solo sends and flushers together
	batches  int // flushers among them
}

// defaultMaxInFlight is how many script calls of one lane may be in flight,
// unless the client's pool holds fewer connections: below it every check is
// sent alone, so up to 4 concurrent callers never wait for a batch.
const defaultMaxInFlight = 4

// maxBatchesInFlight is how many of those calls may be batches. Two keep
// Redis busy with one while the other is on the wire; more would only
// split the queue into smaller batches, and spend more round trips on the
// same checks.
const maxBatchesInFlight = 2

// batchCap is the most batches of one lane in flight at once.
func (s *Store) batchCap() int { return min(maxBatchesInFlight, s.maxInFlight) }

// clientTraits reports whether the client bounds socket reads by a ctx
// deadline (go-redis does with ContextTimeoutEnabled, unless a negative
// ReadTimeout or WriteTimeout turns its socket deadlines off altogether)
// and whether it may resend a command after a network error (go-redis does
// MaxRetries times, 3 by default; a ClusterClient MaxRedirects times).
// Unknown clients are assumed to do the worse of each.
func clientTraits(c redis.UniversalClient) (ctxReads, retries bool) {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		return ctxDeadlines(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout), o.MaxRetries > 0
	case *redis.ClusterClient:
		o := c.Options()
		return ctxDeadlines(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout), o.MaxRetries > 0 || o.MaxRedirects > 0
	case *redis.Ring:
		o := c.Options()
		return ctxDeadlines(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout), o.MaxRetries > 0
	}
	return false, true
}

// ctxDeadlines reports whether go-redis sets a ctx's deadline on its
// sockets: with ContextTimeoutEnabled, unless a timeout is negative (-2,
// which go-redis keeps as -1, sets no socket deadline at all).
func ctxDeadlines(enabled bool, read, write time.Duration) bool {
	return enabled && read >= 0 && write >= 0
}

// newCallID returns a random prefix for the call keys of one Store.
func newCallID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "."
}

// poolSize returns the connection pool size of the go-redis clients whose
// options are known, or 0.
func poolSize(c redis.UniversalClient) int {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().PoolSize
	case *redis.ClusterClient:
		return c.Options().PoolSize
	case *redis.Ring:
		return c.Options().PoolSize
	}
	return 0
}

const laneShards = 32

// laneShard holds the lanes of Cluster slots or Ring hash tags that are
// in flight; idle lanes are dropped, so the map stays as small as the work.
type laneShard struct {
	mu sync.Mutex
	m  map[string]*lane
}

var laneSeed = maphash.MakeSeed()

// laneFor returns the lane of key, locked.
func (s *Store) laneFor(key string) *lane {
	if s.route == oneNode {
		s.single.mu.Lock()
		return &s.single
	}
	var id string
	var idb [2]byte
	if s.route == bySlot {
		sl := slot(key)
		idb = [2]byte{byte(sl >> 8), byte(sl)}
	} else {
		id = hashTag(key)
	}
	var h uint64
	if s.route == bySlot {
		h = uint64(idb[0])<<8 | uint64(idb[1])
	} else {
		h = maphash.String(laneSeed, id)
	}
	sh := &s.lanes[h%laneShards]
	sh.mu.Lock()
	var l *lane
	if s.route == bySlot {
		l = sh.m[string(idb[:])]
		id = string(idb[:])
	} else {
		l = sh.m[id]
	}
	if l == nil {
		if sh.m == nil {
			sh.m = make(map[string]*lane)
		}
		l = &lane{mu: &sh.mu, id: id, shard: sh}
		sh.m[id] = l
	}
	return l
}

// done records that one of a locked lane's calls ended; a lane with none
// left is forgotten if it is a keyed one.
func (l *lane) done() {
	l.inflight--
	if l.inflight == 0 && l.shard != nil {
		delete(l.shard.m, l.id)
	}
}

// do runs o through its lane. It returns nil when o holds its reply (in
// vals, or an error in err), or ctx's error, at once, when o.ctx ends
// first; o then belongs to the flusher and must not be reused. If o was in
// flight its effect stands, as for any script call whose reply arrives
// after its caller stopped waiting; if it was still queued it is dropped.
func (s *Store) do(o *op) error {
	if err := o.ctx.Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: %w", err)
	}
	l := s.laneFor(o.key)
	if l.inflight < s.maxInFlight && l.batches == 0 && len(l.queue) == 0 && s.maxWait == 0 {
		// A call can start: send it now, alone, on the caller's goroutine
		// and ctx. Waiting for company would only add latency.
		l.inflight++
		l.mu.Unlock()
		s.send(o.ctx, []*op{o})
		s.handOff(l)
		return nil
	}
	// No call can start, or a batch is in flight (and o goes after the
	// checks queued before it), or the Store waits for batches to form
	// (maxWait): queue for the next batch.
	l.queue = append(l.queue, o)
	if l.inflight < s.maxInFlight && l.batches < s.batchCap() {
		l.inflight++
		l.batches++
		go s.flush(l, l.inflight == 1)
	}
	l.mu.Unlock()
	select {
	case <-o.done:
		return nil
	case <-o.ctx.Done():
		return fmt.Errorf("ratelimit: redis: %w", o.ctx.Err())
	}
}

// handOff is called by a solo sender when its call returned: its slot in
// flight goes to a flusher of the queued ops, or is given up when nothing
// is queued or batchCap flushers already serve the queue.
func (s *Store) handOff(l *lane) {
	l.mu.Lock()
	if len(l.queue) == 0 || l.batches >= s.batchCap() {
		l.done()
		l.mu.Unlock()
		return
	}
	l.batches++
	l.mu.Unlock()
	go s.flush(l, false)
}

// flush sends the lane's queue, batch after batch, until it is empty; other
// flushers of the lane may take batches from the same queue meanwhile.
func (s *Store) flush(l *lane, wait bool) {
	if wait && s.maxWait > 0 {
		time.Sleep(s.maxWait) // let a batch form
	}
	var batch []*op
	for {
		l.mu.Lock()
		q := l.queue
		n := min(len(q), s.maxBatch)
		batch = batch[:0]
		for _, o := range q[:n] {
			if o.ctx.Err() == nil {
				batch = append(batch, o)
			} else {
				o.err = fmt.Errorf("ratelimit: redis: %w", o.ctx.Err())
				o.done <- struct{}{} // never sent: no effect
			}
		}
		if n == len(q) {
			l.queue = q[:0]
		} else {
			l.queue = append(q[:0], q[n:]...)
		}
		if len(batch) == 0 && len(l.queue) == 0 {
			l.batches--
			l.done()
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()

		if len(batch) > 0 {
			ctx, cancel := s.batchContext(batch)
			s.send(ctx, batch)
			cancel()
			for _, o := range batch {
				o.done <- struct{}{}
			}
		}
		clear(batch)
	}
}

// batchContext returns the context of a coalesced call: no caller's values
// or cancellation, and a deadline that is the latest of the callers', and
// at most the batch timeout from now.
func (s *Store) batchContext(batch []*op) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(s.batchTimeout)
	var latest time.Time
	for _, o := range batch {
		d, ok := o.ctx.Deadline()
		if !ok {
			latest = deadline
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if latest.Before(deadline) {
		deadline = latest
	}
	return context.WithDeadline(context.Background(), deadline)
}

// send runs ops in mode "i", one script call per distinct time (one in
// all with server time), and stores each op's reply or error.
func (s *Store) send(ctx context.Context, ops []*op) {
	same := true
	for _, o := range ops[1:] {
		same = same && o.now == ops[0].now
	}
	if same {
		s.sendGroup(ctx, ops)
		return
	}
	var times []instant
	groups := map[instant][]*op{}
	for _, o := range ops {
		if _, ok := groups[o.now]; !ok {
			times = append(times, o.now)
		}
		groups[o.now] = append(groups[o.now], o)
	}
	for _, t := range times {
		s.sendGroup(ctx, groups[t])
	}
}

func (s *Store) sendGroup(ctx context.Context, ops []*op) {
	if o := ops[0]; len(ops) == 1 && o.kind == opTake && s.plain(&o.req) {
		vals, ok, err := s.takePlain(ctx, time.Time{}, o.now, o.key, &o.req)
		if ok {
			s.stats.roundTrips.Add(1)
			s.stats.sent.Add(1)
			o.vals, o.err = vals, err
			return
		}
	}
	if len(ops) > 1 && s.plainBatch(ops) {
		s.sendPlainBatch(ctx, ops)
		return
	}
	s.sendScript(ctx, ops)
}

// sendScript sends ops as one call of script in mode "i".
func (s *Store) sendScript(ctx context.Context, ops []*op) {
	keys := make([]string, len(ops))
	args := s.header(make([]any, 0, headerLen+fieldsPerRequest*len(ops)), modeIndependent, ops[0].now)
	for i, o := range ops {
		keys[i] = o.key
		args = appendOp(args, o)
	}
	vals, err := s.run(ctx, keys, args, takeWidth*len(ops))
	s.stats.roundTrips.Add(1)
	s.stats.sent.Add(int64(len(ops)))
	for i, o := range ops {
		if err != nil {
			o.err = err
			continue
		}
		copy(o.vals[:], vals[takeWidth*i:])
		if o.vals[0] < 0 {
			o.err = wrongType(&o.req)
		}
	}
}
