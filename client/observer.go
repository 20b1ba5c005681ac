package ratelimitclient

import "time"

// EventKind names what an Event reports.
type EventKind uint8

const (
	// Waited: a request waited for the rate limit before it was sent.
	Waited EventKind = iota + 1
	// WouldWait: a request was not sent because its wait did not fit; its
	// RoundTrip returned a WaitError.
	WouldWait
	// Throttled: a response was a 429, or a 503 or 403 with Retry-After; the
	// partition is blocked until Wait has passed.
	Throttled
	// Retried: a throttled request is being sent again.
	Retried
	// BudgetExhausted: a throttled request that could have been retried was
	// not, because the partition's retry budget was spent.
	BudgetExhausted
)

var kindNames = [...]string{"", "waited", "would_wait", "throttled", "retried", "budget_exhausted"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one thing the Transport did because of a rate limit, reported to
// Transport.Observer.
type Event struct {
	Kind      EventKind
	Partition string        // scheme://host, or what Transport.Partition returned
	Wait      time.Duration // Waited, WouldWait: the wait; Throttled: the block
	Attempt   int           // 0 for the first send of a request, 1 for its first retry, ...
	Status    int           // Throttled, Retried, BudgetExhausted: the response's status
}

func (t *Transport) observe(e Event) {
	if t.Observer != nil {
		t.Observer(e)
	}
}
