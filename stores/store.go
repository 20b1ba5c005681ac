package stores

import (
	"context"
	"fmt"
	"time"
)

// Algorithm selects how a Store counts events against a Limit.
//
// The zero value is GCRA, the default.
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm: a token bucket kept as a single
	// timestamp per key. It is exact, allows Burst events at once and refills
	// one event every Limit.Interval. The default.
	GCRA Algorithm = iota

	// SlidingWindow is the sliding-window counter: the count of the current
	// window plus the previous window's count weighted by how much of it still
	// overlaps the trailing Period. Capacity is Limit.Rate. Two counts per key
	// and no boundary burst, but an estimate: it assumes the previous
	// window's events were spread evenly, so when they were bunched at its
	// end a trailing Period can hold up to (almost) twice Rate. Use GCRA for
	// a strict bound.
	SlidingWindow

	// FixedWindow counts events in windows of Period aligned to the Unix epoch
	// (or to a Quota's calendar). Capacity is Limit.Rate per window. Simple
	// and right for quotas; allows up to twice the rate across a boundary.
	FixedWindow

	// Concurrency limits events in flight: Take acquires Cost slots out of
	// Limit.Rate and Return releases them. Limit.Period is how long a slot
	// lives if never returned (a crashed process), so it must exceed the
	// longest request.
	Concurrency

	// SlidingLog remembers the time of every admitted event and allows an
	// event when fewer than Limit.Rate fit in the trailing Period: exact
	// for any arrival pattern, at the cost of one timestamp per event in
	// the window. For low-cardinality, high-value limits; its Rate is at
	// most MaxSlidingLog, and Request.Validate (so also building a rule)
	// refuses a larger one. See docs/sliding-log.md.
	SlidingLog

	numAlgorithms
)

// MaxSlidingLog bounds the Rate of a SlidingLog limit: its log keeps one
// timestamp per event in the window, so a key costs memory in proportion to
// Rate (see docs/sliding-log.md).
const MaxSlidingLog = 10000

var algorithmNames = [...]string{"gcra", "sliding-window", "fixed-window", "concurrency", "sliding-log"}

// String returns the algorithm's name as used in metrics, e.g. "gcra".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Request asks a Store to check, and if allowed consume, Cost units of Key
// against Limit.
type Request struct {
	// Rule names the rule the key belongs to. Stores keep the state of each
	// (Rule, Key, Algorithm) separately, so two rules never share a bucket.
	Rule string

	// Key identifies the bucket within the rule, for example a client IP.
	Key string

	// Limit is the limit to enforce. It may change between calls for the same
	// key (a tenant changing plan, a reloaded rule); the stored state is read
	// under the new limit, and keeps what the key used: a raise gives its new
	// headroom at once, a lowering keeps the count (windows, Concurrency) or
	// what is owed as a time (GCRA). See docs/config.md.
	Limit Limit

	// Algorithm selects the counting algorithm. The zero value is GCRA.
	Algorithm Algorithm

	// Force makes a Take consume Cost units whether or not they fit: the
	// settlement of units already spent (a cost known only after the
	// response). Allowed then reports whether they fitted; for GCRA the debt
	// beyond the capacity postpones the key's next admissions, for the
	// window algorithms the count may exceed Rate until its window ends.
	// Cost may then exceed the capacity (up to 2^31-1). TakeAll does not
	// take forced requests: settle each with Take.
	Force bool

	// Cost is the number of units this request consumes. Zero asks for the
	// current state without consuming anything (Allowed reports whether one
	// unit would fit). Negative costs and costs above 2^31-1 are invalid.
	Cost int

	// Window, for FixedWindow only, overrides the epoch-aligned window with
	// explicit bounds [Start, End) computed by the caller, for calendar quotas
	// (a day or a month in a time zone). The zero value means epoch-aligned.
	// A window that does not contain the store's current time still counts
	// against its own bounds; RetryAfter and ResetAfter are then never
	// negative. A window that ends before the one a store holds for the key
	// counts against the stored (later) window: windows never go back.
	Window Window

	// Slot, on Return, and on a Take with Force, is the Result.Slot of the
	// Take that consumed the units being given back or settled, so that they
	// apply to exactly what that Take consumed:
	//
	//   - Concurrency (Return): exactly those slots are released, and nothing
	//     if they have already expired. Zero releases the Cost slots that
	//     would expire soonest (Limiter.Return, which holds no token, does
	//     that).
	//   - SlidingLog: Return gives back the events that Take added (the
	//     newest, with Slot zero); a forced take ignores it.
	//   - FixedWindow and SlidingWindow: the units count in the window the
	//     Take counted in, never in a later one; when that window no longer
	//     counts (a fixed window that ended, a sliding window before the
	//     previous one), nothing changes. Zero means the window a Take at the
	//     store's current time counts in.
	//
	// GCRA ignores it: a key's state is one arrival time.
	Slot uint64

	// MaxDelay, for GCRA, makes an allowed Take a reservation (pacing): a
	// request that does not fit now but will fit within MaxDelay, with no
	// other traffic, is allowed and consumed at once, and Result.Delay is
	// how long the caller must wait before acting on it. A request that
	// would need longer is denied, consuming nothing, with RetryAfter the
	// delay it would have needed. A caller that does not wait out the delay
	// (its client left) gives the units back with Return, which restores the
	// key's state exactly. Zero allows no reservation; other algorithms
	// ignore it. Negative is invalid.
	MaxDelay time.Duration
}

// Window is an explicit fixed-window interval [Start, End) in Unix nanoseconds.
//
// PrevStart and NextEnd, when non-zero, are the bounds of the windows either
// side, [PrevStart, Start) and [End, NextEnd). A store that keeps its own
// clock (Redis, on server time) uses them to count a request against the
// window that contains the store's time rather than the caller's, so that
// instances with skewed clocks agree on when a calendar window turns.
type Window struct {
	Start, End         int64
	PrevStart, NextEnd int64
}

// Validate checks the request's limit, cost and algorithm. Stores call it
// before touching state; the error wraps ErrInvalidRequest or ErrInvalidLimit.
func (r *Request) Validate() error {
	if err := r.Limit.Validate(); err != nil {
		return err
	}
	if r.Cost < 0 || r.Cost > MaxCount {
		return fmt.Errorf("%w: cost %d must be between 0 and %d", ErrInvalidRequest, r.Cost, MaxCount)
	}
	if r.Algorithm >= numAlgorithms {
		return fmt.Errorf("%w: unknown %v", ErrInvalidRequest, r.Algorithm)
	}
	if r.Algorithm != GCRA && r.Limit.Burst != 0 && r.Limit.Burst != r.Limit.Rate {
		return fmt.Errorf("%w: %v counts Rate per window and takes no Burst (got %d)", ErrInvalidLimit, r.Algorithm, r.Limit.Burst)
	}
	if r.Algorithm == SlidingLog && r.Limit.Rate > MaxSlidingLog {
		return fmt.Errorf("%w: %v keeps one timestamp per event, and %d per window is more than its bound of %d: use GCRA for an exact limit this large", ErrInvalidLimit, r.Algorithm, r.Limit.Rate, MaxSlidingLog)
	}
	if r.MaxDelay < 0 {
		return fmt.Errorf("%w: negative MaxDelay %v", ErrInvalidRequest, r.MaxDelay)
	}
	if r.Cost > r.Limit.Capacity() && !r.Force {
		return fmt.Errorf("%w: cost %d exceeds the capacity %d of %v", ErrInvalidRequest, r.Cost, r.Limit.Capacity(), r.Limit)
	}
	if w := r.Window; w != (Window{}) && (r.Algorithm != FixedWindow || w.End <= w.Start || w.End <= 0 ||
		w.PrevStart != 0 && w.PrevStart >= w.Start || w.NextEnd != 0 && w.NextEnd <= w.End) {
		return fmt.Errorf("%w: window [%d, %d) needs FixedWindow, End after Start and after 1970, and neighbours either side", ErrInvalidRequest, w.Start, w.End)
	}
	return nil
}

// Result is a Store's decision on one Request.
type Result struct {
	// Allowed reports whether the request fits the limit. When it does not,
	// nothing was consumed.
	Allowed bool

	// Limit is the limit the decision was made against.
	Limit Limit

	// Remaining is the number of units that would still be allowed right now,
	// after this request when it was allowed.
	Remaining int

	// RetryAfter is zero when Allowed. Otherwise it is how long until the same
	// request would fit, assuming no other traffic.
	RetryAfter time.Duration

	// ResetAfter is how long until the limit is back to full capacity,
	// assuming no other traffic.
	ResetAfter time.Duration

	// Slot, for an allowed Take of non-zero cost, identifies what it
	// consumed (an opaque token): for Concurrency the slots it acquired
	// (unique per key while they live), for FixedWindow and SlidingWindow
	// the window it counted in, for SlidingLog the time its events were
	// stamped with. Pass it in Request.Slot to Return exactly
	// those units or to settle against that window. Zero for GCRA and
	// otherwise.
	Slot uint64

	// Delay, for a Take allowed under Request.MaxDelay, is how long the
	// caller must wait before acting on the request: its units are consumed
	// for that moment. Zero when it may act now.
	Delay time.Duration

	// NextAfter is how long until more than Remaining units are available,
	// assuming no other traffic: the t parameter of the RateLimit field.
	// The memory store sets it on window and sliding-log takes, the Redis
	// store on allowed sliding-window and sliding-log takes. A store may
	// leave it zero; the field then
	// derives it from ResetAfter, exactly for GCRA (the time one unit takes
	// to come back) and FixedWindow (the window's end), as an upper bound
	// for SlidingWindow (the time until the key is back to full).
	NextAfter time.Duration
}

// A Store keeps rate-limit state and makes decisions against it.
//
// Implementations must be safe for concurrent use, must make each call atomic
// (no decision sees another's partial update) and must report a backend
// failure as an error, never as a denial. Use TestStore in package
// ratelimittest to check an implementation.
type Store interface {
	// Take checks req and, if it is allowed, consumes req.Cost units. The error
	// is non-nil only when no decision could be made (invalid request, backend
	// failure, ctx done); the Result is then the zero value.
	Take(ctx context.Context, req Request) (Result, error)

	// TakeAll checks every request and consumes them only if all are allowed:
	// when any is denied nothing is consumed. results must have the length of
	// reqs; results[i] is the decision for reqs[i] alone, with Remaining as if
	// nothing were consumed when another request was denied. Requests with
	// Force are invalid here.
	TakeAll(ctx context.Context, reqs []Request, results []Result) error

	// Return gives back req.Cost units taken earlier for the same key: a refund
	// after a failed operation, or the release of Concurrency slots. It never
	// raises the state above full capacity.
	Return(ctx context.Context, req Request) error
}

// LocalStore is implemented by stores that answer from process memory
// without I/O. A ratelimit.Limiter checks rules on local stores first, so that a
// request they deny costs no network round trip.
type LocalStore interface {
	Store
	Local() bool
}

// Resetter is implemented by stores that can forget one key's state: the
// memory stores and the Redis store do. Reset drops the state of (rule, key,
// alg), so that the key starts again with full capacity; resetting a key that
// has no state is not an error. Concurrency slots held by requests in flight
// are forgotten too: their later release finds nothing to release.
type Resetter interface {
	Reset(ctx context.Context, rule, key string, alg Algorithm) error
}

// Clock tells the time. Stores and middleware take one so that tests can
// control time; see ratelimittest.NewClock. SystemClock is the default.
//
// Now is called by every goroutine serving a request, concurrently and
// without a lock, so a Clock of your own must be safe for concurrent use
// (ratelimittest.Clock is) and cheap: it is read on every decision. It
// need not be monotonic: a reading earlier than one a key has already seen
// never lets that key admit more (see docs/exact-limits.md).
type Clock interface {
	Now() time.Time
}

// SystemClock returns the Clock that reads time.Now.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
