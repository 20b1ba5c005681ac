package ratelimitclient

import (
	"strings"
	"sync/atomic"
)

// listCache keeps the last value of one Structured Fields list a partition's
// server sent, parsed. Servers send the same RateLimit-Policy on every
// response: a value equal to the last one is not parsed again. A new value
// costs one allocation, shared by the requests that read it. (RateLimit
// changes whenever the quota left does: it is read from a template, see
// template.go.)
type listCache struct {
	last atomic.Pointer[parsedList]
}

// parsedList is a field value and the list it parsed to.
type parsedList struct {
	value      string
	items      [maxItems]sfItem
	n          int
	ok         bool
	concurrent bool // value mentions the concurrent-requests quota unit
}

// parse returns the items of the list v, from the cache when v is the value
// parsed last. A nil cache parses every time, into buf.
func (c *listCache) parse(v string, buf *[maxItems]sfItem) ([]sfItem, bool) {
	if c == nil {
		n, ok := parseList(v, buf)
		return buf[:n], ok
	}
	if pl := c.last.Load(); pl != nil && pl.value == v {
		return pl.items[:pl.n], pl.ok
	}
	pl := &parsedList{value: v, concurrent: strings.Contains(v, concurrentRequests)}
	pl.n, pl.ok = parseList(v, &pl.items)
	c.last.Store(pl)
	return pl.items[:pl.n], pl.ok
}

// fieldCaches are a partition's caches of its server's IETF fields.
type fieldCaches struct {
	rateLimit templateCache
	policy    listCache
}

// rateOnly reports whether the RateLimit-Policy lines pol are the value kept
// parsed last, and it names no policy of requests in flight: dropConcurrent
// then has nothing to drop, and need not look.
func (fc *fieldCaches) rateOnly(pol []string) bool {
	if len(pol) != 1 {
		return false
	}
	pl := fc.policy.last.Load()
	return pl != nil && pl.value == pol[0] && !pl.concurrent
}
