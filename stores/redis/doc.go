// Package redisstore is a stores.Store on Redis, so that any number of
// instances share one limit with exactly the behaviour of the in-process
// memory store.
//
// The production setup (see Example): the Store's default time budget
// bounds every call, a Breaker stops calling a Redis that keeps failing,
// and the failure policy decides requests meanwhile:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	store := breaker.New(redisstore.New(client), breaker.Config{})
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
//		ratelimit.WithStore(store)) // fails open, the default FailurePolicy
//
// While Redis is down or hung a request then waits at most DefaultTimeout
// (50ms), and nothing once the breaker is open.
//
// New takes any redis.UniversalClient: a *redis.Client (standalone, or a
// Sentinel failover client from redis.NewFailoverClient), a
// *redis.ClusterClient or a *redis.Ring.
//
// # One round trip, one script
//
// Every check is at most one EVALSHA of one Lua script that implements
// every algorithm (GCRA, sliding window, fixed window, concurrency) for one
// or many requests, atomically on the server. The script is run with
// EVALSHA and falls back to EVAL on NOSCRIPT, which caches it again: it
// works on every Redis from 2.6 on, including managed services that forbid
// FUNCTION LOAD, and survives SCRIPT FLUSH, a restart, a failover or a new
// Cluster node without any set-up step. Redis Functions would need loading
// on every node, again after each of those events, and need Redis 7. One
// script means one SHA to manage. A single GCRA check takes a fast path in
// the script.
//
// # Concurrency
//
// Concurrency state is a sorted set of the slots in flight, scored by
// their deadlines: each slot expires on its own Limit.Period after it was
// taken, so a slot lost by a crashed holder, a failed Return or an
// acquisition whose reply came after its budget is free again one Period
// later, whatever other callers do meanwhile. An allowed Take of cost n
// holds n members and returns a token in Result.Slot; Return with that
// token in Request.Slot (and the same Cost) releases exactly those slots,
// and nothing once they expired; Return with Slot 0 releases the Cost
// slots that expire soonest. An acquisition or a release is still one
// script call.
//
// # Sliding log
//
// ratelimit.SlidingLog state is a sorted set with one member per event in
// the window, scored by the time it was admitted at (server time, or the
// WithClock time). A check is one script call that counts the window and,
// when it allows, drops the events that left, adds its own and sets the
// TTL, all in one step; members are ids drawn past the newest, unique
// whatever instance adds them. Result.Slot is the take's time: Return with
// it gives back that take's events, with Slot 0 the newest. See
// docs/sliding-log.md.
//
// # Pacing and settlements
//
// A GCRA Take with Request.MaxDelay (a reservation, answered with
// Result.Delay) and a Take with Request.Force (a settlement, charged
// whether or not it fits) are each one script call, coalesced with others
// but always decided on their own. An allowed window Take returns the end
// of its window, in microseconds on the script's time base, as
// Result.Slot: a forced Take or a Return with that Slot applies to that
// window, in the same single call. An allowed GCRA Take of non-zero cost
// returns the key's time just after it, in microseconds, as Result.Slot: a
// Return with it gives a reservation back exactly when it is the latest,
// or when none waits behind it and the key has no hole; otherwise the
// turn is kept empty as a hole (in a hash beside the key, at most 4096 per
// key) that the key's time moves back through once every later
// reservation has been given back, so a freed turn is never handed to a
// newcomer while a later reservation keeps its own. Reset deletes the holes too. Such requests bypass every local
// answer: the denied cache (which they also clear for their key), leases
// and a hot key's share. On a split hot key a settlement is charged to one
// of its parts and a reservation is denied for the marker's time. A window
// count is capped at 2^31-1 (the memory store's at 2^32-1).
//
// # Retries and budgets
//
// go-redis resends a command after a network error (MaxRetries, 3 by
// default). For a client that may do so, every script call carries a call
// key: a resent call finds it and replies the first run's reply without
// applying anything again, so a take or a return is never applied twice.
// The key lives as long as the call's deadline plus 100ms (one more SET per
// call, in the same script).
//
// On a Cluster, a call whose slot is being moved is refused with TRYAGAIN
// (or, once go-redis runs out of redirects, the last ASK or MOVED) without
// running: the store sends the same call again, call key and all, after a
// short backoff, until it runs or its budget is spent, so a check on a
// moving slot waits for the handover instead of failing.
//
// Every Take, TakeAll and Return that goes to Redis is bounded by the
// Store's budget (DefaultTimeout unless WithTimeout), or by its ctx's
// deadline if that comes first, whether or not the client has
// ContextTimeoutEnabled: see WithTimeout.
//
// # Fewer round trips
//
// Three mechanisms cut round trips further. The first two keep every
// decision exact and are on by default; the third is opt-in.
//
// Coalescing (WithCoalescing, WithoutCoalescing). A Take or Return is sent
// at once, alone, whenever a call can start: while fewer than 4 script calls
// (or the client's pool size, if smaller) are in flight and no batch is. A
// check never waits for a batch that would not have formed, so up to 4
// concurrent callers get exactly the round trips of WithoutCoalescing.
// Checks made while no call can start queue, and when a call returns
// everything queued goes out as one script call that decides each check on
// its own, in order, each exactly as if it were alone (the script is
// atomic, so each check is too). At most 2 batches are in flight, Redis
// working on one while the other is on the wire. One call carries up to
// DefaultMaxBatch checks, and amortises the per-call cost on the server as
// well as the network round trip. Measured against one local redis-server
// on a shared 2-core machine (BenchmarkCoalescingLatency, median of 5
// interleaved runs, load average 8-13), the p50 of a check with coalescing
// is never above the p50 without: equal within noise from 1 to 4 callers
// (every check goes alone), and 345µs against 552µs at 8 callers, 477µs
// against 1.03ms at 16, 1.02ms against 4.18ms at 64, with 0.39, 0.20 and
// 0.05 round trips per check. Calls are grouped by what one script may
// touch: everything on a single node, one slot on Cluster, one hash tag on
// a Ring (so there coalescing pays for hot keys, such as a flood on one
// client or a global rule, rather than for many distinct keys). TakeAll is
// not coalesced.
//
// A caller whose ctx ends while its check is queued or in flight returns
// ctx's error at once. A check still queued is then never sent; one already
// in flight completes on the server, and what it consumed stays consumed,
// exactly as when the reply to a lone EVALSHA arrives after its caller gave
// up. A coalesced call carries no caller's ctx: its deadline is the latest
// of its callers' deadlines, capped by WithBatchTimeout. No goroutine
// outlives the work: a queued batch is sent by a goroutine that exits once
// the queue is empty, so a Store needs no Close.
//
// The denied cache (WithDeniedCacheSize, WithoutDeniedCache). When Redis
// denies a GCRA, sliding-window or fixed-window check with Remaining 0, the
// Store remembers the key until one unit is back and answers its checks
// locally in the meantime, with RetryAfter and ResetAfter counted down: a
// denied hot key, such as an attacker's flood, costs no round trip. This is
// exact because while a key has nothing left no check can consume from it,
// so its state only ages: the Result Redis would give is a function of the
// elapsed time. The one exception is a refund: a Return through this Store
// forgets the key, but a Return on another instance cannot reach this
// cache, so this instance may keep denying the key until its cached time
// passes. The cache times a denial from when its request was sent, so it
// never denies longer than Redis would. GCRA and fixed-window denials
// answer any cost; sliding-window and sliding-log denials answer cost 1
// only (other costs depend on state a denial does not reveal); Concurrency
// is never cached, nor are cost-0 peeks. The cache holds DefaultDeniedCacheSize keys.
//
// Lease mode (WithLease, opt-in, GCRA only). A Store takes a few units of
// a key at a time and spends them locally until they run out or the lease
// expires. With I instances and leases of n units, admitted requests in any
// window exceed the exact bound by at most I×n units (2% of the limit with
// 4 instances and a lease fraction of 0.005); see WithLease. A check that
// finds a grant in flight for its key never waits for it: it asks Redis
// directly (coalesced with the others, and exact), so on a hot key lease
// mode makes no check wait longer than the default mode does.
//
// Stats reports round trips, checks sent, and the checks the denied cache
// and leases answered.
//
// # Time
//
// The script reads the Redis server's TIME, in integer microseconds, so the
// clocks of the instances do not matter. (WithClock sends the client's time
// instead, for tests.) Time never goes back for a key: a request whose
// time falls before the window the key holds (a clock stepped back, a
// skewed instance with WithClock, TakeAt with an old time) counts against
// the stored, later window and never restarts it; GCRA keeps its
// theoretical arrival time. A calendar quota's request carries its
// neighbour windows (stores.Window's PrevStart and NextEnd, which the
// middleware fills): the script counts it against whichever of the three
// contains the server's time, so instances whose clocks disagree by up to a
// window still agree on when a day or a month turns. All durations are whole microseconds: the refill
// interval of GCRA is ceil(Period/Rate) rounded up to the microsecond, where
// the memory store rounds up to the nanosecond, so for a limit whose interval
// is not a whole number of microseconds (PerSecond(3): 333,334µs instead of
// 333,333,334ns) this store is stricter by less than a microsecond per event.
// Likewise a sliding window's RetryAfter is the memory store's rounded up to
// the microsecond. For limits with whole-microsecond intervals, on a
// millisecond time grid, every Result equals the memory store's.
//
// Lua numbers are doubles; the script keeps every integer below 2^53 and
// computes the sliding window's weighted count, whose product can reach
// 2^84 (a count of 2^31 times a period of a century in microseconds),
// exactly with split multiplication.
//
// # Keys and TTLs
//
// A request's state lives in one key, "<prefix>{<key>}:<algorithm>:<rule>",
// with the default prefix "ratelimit:v1:" (see WithPrefix; the version
// changes when a new release could not read an older one's state; an older
// release may misread a newer one's, see DefaultPrefix). The client key, with '%' and '}' escaped,
// is the Cluster hash tag, so all rules of one client share a slot and no
// user input can pick another tag. The state is one small string: the GCRA
// theoretical arrival time and the refill interval it counts in (so that a
// raised limit gives its new headroom at once), or a window's bounds and
// counts. Every write sets
// a TTL in the same SET (PX, in milliseconds rounded up, at least 1): the
// time until the state becomes equivalent to an absent one. A Return never
// creates a key.
//
// # Cluster and TakeAll
//
// On a single node, and whenever all keys of a TakeAll share a slot (all
// rules of one client key do), TakeAll is one script and exactly
// all-or-nothing. Otherwise the requests are grouped by slot (by hash tag on
// a Ring) and each group runs its script in parallel, all-or-nothing within
// the group. If any group denies or fails, the groups that consumed are
// compensated by returning their cost, and the results are reported as the
// memory store does (allowed requests as a peek with nothing consumed). Until
// the compensation lands, one round trip later, other callers may see those
// units consumed: a brief over-count, never an under-count. If the
// compensation fails, the units stay consumed until they refill. A
// Concurrency request compensated this way gives back exactly the slots it
// took, by token. Each shard uses its own TIME; keep the nodes' clocks in
// sync (NTP), as Redis Cluster itself expects.
//
// # Errors
//
// A backend failure (connection refused, timeout, cancelled ctx, a script
// error) is returned as an error prefixed "ratelimit: redis:" that wraps the
// cause, never as a denial; the middleware's failure policy decides what
// happens then. A call that ran out of budget wraps
// context.DeadlineExceeded (errors.Is), also when the client reported an
// i/o timeout.
//
// A request's Rule and Key together may be up to MaxKeyLen bytes; the
// middleware hashes long keys, so only direct callers can reach the bound.
package redisstore
