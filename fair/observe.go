package fair

import (
	"net/http"
	"time"
)

// Outcome is what a Scheduler did with a request.
type Outcome uint8

// The outcomes reported to a Observer.
const (
	Admitted  Outcome = iota // the request got a seat, at once or after waiting
	Exempt                   // its level is exempt: admitted without a seat
	QueueFull                // its flow's queue was full: 429
	TimedOut                 // no seat within MaxWait or its context deadline: 503
	Canceled                 // its context ended while it waited: 503
	numOutcomes
)

var outcomeNames = [...]string{"admitted", "exempt", "queue_full", "timed_out", "canceled"}

// String returns the outcome's metrics label, e.g. "queue_full".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event describes one decision of a Scheduler. Level and Outcome are safe
// metric labels; Flow is the flow key, unbounded, for logs and tests only.
type Event struct {
	Level   string  // the level's name
	Outcome Outcome // what happened
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

// Observer receives an Event for every decision of a Scheduler.
// ObserveFair is called synchronously on the request path, possibly
// concurrently: keep it fast and safe for concurrent use. (The method is
// not named Observe, so that one type can also be a ratelimit.Observer.)
type Observer interface {
	ObserveFair(e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(e Event)

// ObserveFair calls f(e).
func (f ObserverFunc) ObserveFair(e Event) { f(e) }
