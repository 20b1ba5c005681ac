package ratelimit

import (
	"net/http"
	"time"
)

// FairOutcome is what a Fair did with a request.
type FairOutcome uint8

// The outcomes reported to a FairObserver.
const (
	FairAdmitted  FairOutcome = iota // the request got a seat, at once or after waiting
	FairExempt                       // its level is exempt: admitted without a seat
	FairQueueFull                    // its flow's queue was full: 429
	FairTimedOut                     // no seat within MaxWait or its context deadline: 503
	FairCanceled                     // its context ended while it waited: 503
	numFairOutcomes
)

var fairOutcomeNames = [...]string{"admitted", "exempt", "queue_full", "timed_out", "canceled"}

// String returns the outcome's metrics label, e.g. "queue_full".
func (o FairOutcome) String() string {
	if o < numFairOutcomes {
		return fairOutcomeNames[o]
	}
	return "unknown"
}

// FairEvent describes one decision of a Fair. Level and Outcome are safe
// metric labels; Flow is the flow key, unbounded, for logs and tests only.
type FairEvent struct {
	Level   string      // the level's name
	Outcome FairOutcome // what happened
	// Flow is the flow key, computed only when the request had to wait:
	// "" on the uncontended path (and for a key that failed).
	Flow string
	// Queue is the index of the queue the request joined (or found full),
	// -1 when it did not wait.
	Queue      int
	Wait       time.Duration // time spent waiting for a seat (0 on the uncontended path)
	RetryAfter time.Duration // the Retry-After sent with a refusal
	Request    *http.Request // the request; do not retain it
}

// FairObserver receives a FairEvent for every decision of a Fair.
// ObserveFair is called synchronously on the request path, possibly
// concurrently: keep it fast and safe for concurrent use.
type FairObserver interface {
	ObserveFair(e FairEvent)
}

// FairObserverFunc adapts a function to the FairObserver interface.
type FairObserverFunc func(e FairEvent)

// ObserveFair calls f(e).
func (f FairObserverFunc) ObserveFair(e FairEvent) { f(e) }
