package ratelimitclient

import (
	"strings"
	"sync/atomic"
)

// A server's RateLimit value changes with nearly every response, but only
// in its numbers: `"default";r=41;t=16` follows `"default";r=42;t=17`. A
// partition keeps the last value it parsed as a template: its items, and
// where the digits of their r and t parameters are. A value that differs
// from the template only in those digits has the template's items with the
// digits' values: reading it compares the text between the numbers and
// reads the numbers, a fraction of a parse. Any other value is parsed.
//
// The items are the same as a parse's: a run of digits after a parameter's
// "=" is an Integer whatever run it is (up to 15 digits), and what follows
// it, the same text as the template's, is not a digit or a decimal point
// (the template's number would not have been an Integer).

// template is a RateLimit value parsed, with where its numbers are.
type template struct {
	value   string
	items   [maxItems]sfItem
	n       int
	nums    [2 * maxItems]number // in the order they appear in value
	k       int
	matched atomic.Bool  // a value other than value was read from it
	misses  atomic.Int64 // values that did not match it
}

// number is where the digits of an item's r or t parameter are.
type number struct {
	at   span
	item int
	t    bool // the t parameter; r when false
}

// newTemplate returns the template of the valid List v, parsed to items.
func newTemplate(v string, items []sfItem) *template {
	tp := &template{value: v, n: len(items)}
	copy(tp.items[:], items)
	for i, it := range items {
		for _, nb := range [...]number{{it.rAt, i, false}, {it.tAt, i, true}} {
			if nb.at.to == 0 {
				continue
			}
			k := tp.k // insertion sort: r mostly comes before t
			for ; k > 0 && tp.nums[k-1].at.from > nb.at.from; k-- {
				tp.nums[k] = tp.nums[k-1]
			}
			tp.nums[k] = nb
			tp.k++
		}
	}
	return tp
}

// read stores in items the items of v and reports whether v differs from
// the template only in the digits of its numbers. It does not allocate.
func (tp *template) read(v string, items *[maxItems]sfItem) bool {
	copy(items[:tp.n], tp.items[:tp.n])
	i, o := 0, 0 // positions in v and in the template's value
	for _, nb := range tp.nums[:tp.k] {
		lit := tp.value[o:nb.at.from]
		if !strings.HasPrefix(v[i:], lit) {
			return false
		}
		i += len(lit)
		var n int64
		j := i
		for ; j < len(v) && isDigit(v[j]); j++ {
			n = n*10 + int64(v[j]-'0')
		}
		if j == i || j-i > 15 {
			return false // no Integer, or one the parser refuses
		}
		it := &items[nb.item]
		if nb.t {
			it.t, it.tAt = n, span{int32(i), int32(j)}
		} else {
			it.r, it.rAt = n, span{int32(i), int32(j)}
		}
		i, o = j, int(nb.at.to)
	}
	return v[i:] == tp.value[o:]
}

// templateCache keeps a partition's RateLimit template.
type templateCache struct {
	last atomic.Pointer[template]
}

// parse returns the items of the List v, read from the template when v
// matches it, and whether v is a valid List. A value that does not match is
// parsed into buf and becomes the template, in one allocation, when the
// template matched a value since it was made: a server whose values change
// in more than their numbers on every response costs an allocation only
// after the first, second, fourth, eighth... value that did not match. A nil
// cache parses every time.
func (c *templateCache) parse(v string, buf *[maxItems]sfItem) ([]sfItem, bool) {
	if c == nil {
		n, ok := parseList(v, buf)
		return buf[:n], ok
	}
	tp := c.last.Load()
	if tp != nil && tp.read(v, buf) {
		if !tp.matched.Load() && v != tp.value {
			tp.matched.Store(true)
		}
		return buf[:tp.n], true
	}
	n, ok := parseList(v, buf)
	if !ok {
		return nil, false
	}
	if tp != nil && !tp.matched.Load() {
		if m := tp.misses.Add(1); m&(m-1) != 0 {
			return buf[:n], true
		}
	}
	c.last.Store(newTemplate(v, buf[:n]))
	return buf[:n], true
}
