// Package stores is the contract between the rate limiter and the places it
// keeps its counts: what a store implementer needs, without the
// middleware's names around it.
//
// A Store takes a Request (a rule, a key, a Limit, an Algorithm and a cost)
// and answers with a Result; Return gives units back; TakeAll decides several
// requests all or nothing. Resetter and LocalStore are the optional
// capabilities a Limiter looks for. The two stores the project ships
// implement it: the in-process store in stores/memory and the Redis store in
// stores/redis. Package ratelimittest checks an implementation of your own
// against the same contract.
//
// Package ratelimit re-exports the names a middleware user writes (Limit,
// Result, Store, Clock, Algorithm and its constants) as aliases of these, so
// a value of one is a value of the other.
package stores
