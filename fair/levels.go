package fair

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/problem"
)

// Level is a priority level of a Scheduler: a class of requests (critical
// writes, interactive reads, batch jobs, health checks) with its share of
// the seats and its own queues.
type Level struct {
	// Name identifies the level; Classify returns it. Required.
	Name string

	// Shares is the level's relative share of the seats: its nominal seats
	// are Seats x Shares / (sum of the non-exempt levels' Shares), rounded
	// up. While it has waiting requests a level below its nominal seats is
	// served before any level that borrows. A level with 0 shares has no
	// guarantee: it runs on seats the others leave idle.
	Shares int

	// Reserve is the percentage (0-100) of the level's share of the seats
	// (rounded down) that other levels may not borrow even while they are
	// idle. 0, the default,
	// lends every idle seat (work conserving); 100 keeps them all for the
	// level (a reserve for critical traffic that the others cannot eat).
	Reserve int

	// Exempt levels are never queued nor refused and take no seat: health
	// checks, the control plane.
	Exempt bool

	// Flow keys the flows of the level that are queued fairly against each
	// other: a tenant, a user, a client IP (any KeyFunc). A request whose
	// key fails joins the level's keyless flow. Nil puts the whole level in
	// one flow (first come, first served). The key is computed only when
	// the request must wait.
	Flow ratelimit.KeyFunc

	// Queues, HandSize and QueueLength configure shuffle sharding: a flow
	// is dealt HandSize of the level's Queues by a hash of its key and
	// waits in the shortest of them, which holds at most QueueLength
	// waiters; a request finding it full is refused with 429. Zero values
	// mean Kubernetes APF's defaults: 64 queues, hands of 8, 50 waiters.
	// HandSize must not exceed Queues nor 16, and Queues^HandSize must fit
	// in 60 bits (the hash is the deck's entropy).
	Queues, HandSize, QueueLength int
}

// Shuffle-sharding defaults (Kubernetes APF's).
const (
	DefaultQueues      = 64
	DefaultHandSize    = 8
	DefaultQueueLength = 50
	maxHand            = 16
)

// levelState is a Level's state. Its mutable fields are guarded by Scheduler.mu.
type levelState struct {
	Level
	f *Scheduler

	nominal, reserve int // seats, from Scheduler.seats
	inUse, queued    int
	seq              uint64  // waiters enqueued so far, for their arrival order
	tickets          *ticket // released tickets of uncontended admissions, for reuse
	queues           []queueState
	flows            map[uint64]flowState // the flows waiting, by key hash
	vtime            float64              // virtual time: the start of the last dispatch
	maxStart         float64              // the latest start of any queue

	// svc is the observed service time of one request, in seconds: a
	// moving average over the requests that waited (the uncontended path
	// does not read the clock; without contention nothing needs it).
	svc float64

	problem429, problem503 []byte
}

// flowState is a waiting flow: its queue and how many of its requests
// wait there.
type flowState struct {
	queue, waiting int
}

const (
	svcInitial = 0.01 // seconds, until a request has been observed
	svcWeight  = 1.0 / 16
)

func newLevelState(f *Scheduler, idx int, l Level) *levelState {
	switch {
	case l.Name == "":
		panic(fmt.Sprintf("ratelimit: fair.New: level %d has no name", idx))
	case l.Shares < 0:
		panic(fmt.Sprintf("ratelimit: fair.New: level %q: negative Shares %d", l.Name, l.Shares))
	case l.Reserve < 0 || l.Reserve > 100:
		panic(fmt.Sprintf("ratelimit: fair.New: level %q: Reserve %d is not a percentage", l.Name, l.Reserve))
	case l.Queues < 0 || l.HandSize < 0 || l.QueueLength < 0:
		panic(fmt.Sprintf("ratelimit: fair.New: level %q: negative queue setting", l.Name))
	}
	if l.Queues == 0 {
		l.Queues = DefaultQueues
	}
	if l.HandSize == 0 {
		l.HandSize = min(DefaultHandSize, l.Queues)
	}
	if l.QueueLength == 0 {
		l.QueueLength = DefaultQueueLength
	}
	if l.HandSize > l.Queues || l.HandSize > maxHand {
		panic(fmt.Sprintf("ratelimit: fair.New: level %q: HandSize %d exceeds Queues %d or %d", l.Name, l.HandSize, l.Queues, maxHand))
	}
	if deckBits(l.Queues, l.HandSize) > 60 {
		panic(fmt.Sprintf("ratelimit: fair.New: level %q: %d queues dealt %d at a time need more than 60 bits of hash", l.Name, l.Queues, l.HandSize))
	}
	lv := &levelState{Level: l, f: f, svc: svcInitial}
	if !l.Exempt {
		lv.queues = make([]queueState, l.Queues)
		lv.flows = make(map[uint64]flowState)
		lv.problem429 = problemBody(429, l.Name, "Too many requests from this flow are waiting; retry later.")
		lv.problem503 = problemBody(503, l.Name, "The server is at capacity for this class of request; retry later.")
	}
	return lv
}

// deckBits is log2(queues x (queues-1) x ... x (queues-hand+1)), rounded up.
func deckBits(queues, hand int) int {
	total := 0.0
	for i := range hand {
		total += math.Log2(float64(queues - i))
	}
	return int(math.Ceil(total))
}

// observeService folds one request's service time into the estimate.
// Scheduler.mu is held.
func (lv *levelState) observeService(d time.Duration) {
	lv.svc += svcWeight * (max(d.Seconds(), 1e-6) - lv.svc)
}

// retryAfter is the Retry-After, in whole seconds from 1 to 32, for a
// request refused at lv: the time ahead requests take to drain at the seats
// lv gets, or, for a full queue of length qlen, at the flow's fair share of
// them. Scheduler.mu is held.
func (lv *levelState) retryAfter(qlen int) int64 {
	seats := float64(max(lv.nominal, lv.inUse, 1))
	ahead := float64(lv.queued)
	if qlen > 0 {
		active := 0
		for i := range lv.queues {
			if len(lv.queues[i].waiters) > 0 {
				active++
			}
		}
		ahead = float64(qlen * max(active, 1))
	}
	s := math.Ceil(ahead * lv.svc / seats)
	return int64(min(max(s, 1), 32))
}

// problemBody is an RFC 9457 body naming the level.
func problemBody(status int, level, detail string) []byte {
	typ := "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	if status == 429 {
		typ = problem.QuotaExceeded
	}
	title := "Too Many Requests"
	if status == 503 {
		title = "Service Unavailable"
	}
	b := []byte(`{"type":` + strconv.Quote(typ) + `,"title":` + strconv.Quote(title) +
		`,"status":` + strconv.Itoa(status) + `,"detail":` + strconv.Quote(detail) +
		`,"level":` + strconv.Quote(level) + "}\n")
	return b
}

// mix64 finalizes a hash (splitmix64), so that every bit of the result
// depends on every bit of the input.
func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// flowHash hashes a flow key (FNV-1a, then mixed) without allocating.
func flowHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// deal writes into hand the distinct queues a flow with hash h is dealt
// out of deck, and returns how many. Each card is drawn from the cards
// left, using h as a mixed-radix number (deck, deck-1, ...); the drawn
// index counts past the cards already dealt, kept sorted.
func deal(h uint64, deck, size int, hand *[maxHand]int) int {
	var sorted [maxHand]int
	for i := range size {
		n := uint64(deck - i)
		c := int(h % n)
		h /= n
		j := 0
		for ; j < i && sorted[j] <= c; j++ {
			c++
		}
		copy(sorted[j+1:i+1], sorted[j:i])
		sorted[j] = c
		hand[i] = c
	}
	return size
}
