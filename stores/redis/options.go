package redisstore

import (
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
)

// DefaultPrefix is the default key prefix. Its version segment changes
// whenever the format of the stored state does, so that a new release never
// misreads keys written by an old one.
const DefaultPrefix = "ratelimit:v1:"

// ClockTTLSlack is added to the TTL of every key written by a Store that
// uses WithClock. Expired state is equivalent to absent state, so keeping a
// key longer never changes a decision; the slack keeps a key alive when the
// given clock runs behind Redis's (a skewed host, or a test clock that moves
// slower than real time).
const ClockTTLSlack = 10 * time.Second

// An Option configures a Store.
type Option func(*config)

type config struct {
	prefix string
	clock  ratelimit.Clock
}

// WithPrefix sets the prefix of every key the Store writes; the default is
// DefaultPrefix. Stores that share a prefix share state. Keep a version
// segment in it ("myapp:rl:v1:"). The prefix must not contain '{' or '}':
// the Store places its own hash tag after it, and a brace in the prefix
// would put every key in one Cluster slot. WithPrefix panics if it does.
func WithPrefix(p string) Option {
	if strings.ContainsAny(p, "{}") {
		panic("redisstore: WithPrefix: the prefix must not contain '{' or '}'")
	}
	return func(c *config) { c.prefix = p }
}

// WithClock makes the Store read time from clock and send it with every
// call, instead of reading the Redis server's TIME.
//
// It is meant for tests (pass a ratelimittest.Clock to drive time) and for
// a deliberately client-clocked setup. With it, the instances sharing a
// limit must agree on the time: clock skew between them shifts their
// decisions, which server time avoids. Keys written with a client clock
// live ClockTTLSlack longer. Times are truncated to the microsecond.
func WithClock(clock ratelimit.Clock) Option {
	if clock == nil {
		panic("redisstore: WithClock needs a clock")
	}
	return func(c *config) { c.clock = clock }
}
