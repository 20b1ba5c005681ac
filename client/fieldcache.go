package ratelimitclient

import "sync/atomic"

// listCache keeps the last value of one Structured Fields list a partition's
// server sent, parsed. Servers send the same RateLimit-Policy on every
// response: a value equal to the last one is not parsed again. A new value
// costs one allocation, shared by the requests that read it. (RateLimit is
// not kept: it changes whenever the quota left does, and a response that
// repeats it is usually not parsed at all, see repeated.go.)
type listCache struct {
	last atomic.Pointer[parsedList]
}

// parsedList is a field value and the list it parsed to.
type parsedList struct {
	value string
	items [maxItems]sfItem
	n     int
	ok    bool
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
	pl := &parsedList{value: v}
	pl.n, pl.ok = parseList(v, &pl.items)
	c.last.Store(pl)
	return pl.items[:pl.n], pl.ok
}

// fieldCaches are a partition's caches of its server's IETF fields.
type fieldCaches struct {
	policy listCache
}
