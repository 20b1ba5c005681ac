package ratelimitclient

import "strings"

// This file parses the subset of Structured Field Values (RFC 9651) that the
// RateLimit and RateLimit-Policy fields use: a List of Items with
// Parameters. Bare items of every type are recognised so that a valid field
// with parameters this package does not use (pk, qu) still parses; inner
// lists are rejected. Parsing never allocates unless a string contains
// escapes.

// maxItems bounds the list members kept from one field; members beyond it
// are parsed for validity and otherwise ignored.
const maxItems = 8

// absent marks a parameter that was not given.
const absent = -1

// sfItem is one list member: its name (a String or Token bare item, empty
// for other types) and the integer parameters this package reads.
type sfItem struct {
	name       string
	r, t, q, w int64 // absent when missing or not a non-negative Integer
	rAt, tAt   span  // where r's and t's digits are in the line (see template.go)
}

// span is where a number's digits are in a line: [from, to), empty when
// the number is absent.
type span struct{ from, to int32 }

// sfParser walks one field line.
type sfParser struct {
	s string
	i int
}

// parseList parses v as a List of Items into items and returns how many were
// kept. ok is false when v is not a valid List: the field is then ignored.
func parseList(v string, items *[maxItems]sfItem) (n int, ok bool) {
	p := sfParser{s: v}
	p.skipSP()
	for p.i < len(p.s) {
		var it sfItem
		if !p.item(&it) {
			return 0, false
		}
		if n < maxItems {
			items[n] = it
			n++
		}
		if !p.listSep() {
			return 0, false
		}
	}
	return n, true
}

// listSep consumes what follows a List member: optional whitespace, then
// the end of the line, or a comma and optional whitespace before the next
// member. It reports false for anything else, a trailing comma included.
func (p *sfParser) listSep() bool {
	p.skipOWS()
	if p.i == len(p.s) {
		return true
	}
	if p.s[p.i] != ',' {
		return false
	}
	p.i++
	p.skipOWS()
	return p.i < len(p.s) // a trailing comma is no List
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// item parses a bare item and its parameters.
func (p *sfParser) item(it *sfItem) bool {
	it.r, it.t, it.q, it.w = absent, absent, absent, absent
	it.rAt, it.tAt = span{}, span{}
	name, _, ok := p.bare()
	if !ok {
		return false
	}
	it.name = name
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return false
		}
		val, at := int64(absent), span{}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			from := p.i
			_, n, ok := p.bare()
			if !ok {
				return false
			}
			val = n
			if n != absent {
				at = span{int32(from), int32(p.i)}
			}
		}
		switch key {
		case "r":
			it.r, it.rAt = val, at
		case "t":
			it.t, it.tAt = val, at
		case "q":
			it.q = val
		case "w":
			it.w = val
		}
	}
	return true
}

// key parses a parameter key.
func (p *sfParser) key() (string, bool) {
	start := p.i
	if p.i == len(p.s) || !(isLCAlpha(p.s[p.i]) || p.s[p.i] == '*') {
		return "", false
	}
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}

// bare parses a bare item. It returns the text of a String or Token, the
// value of a non-negative Integer (absent for any other type), and whether
// the item is well formed.
func (p *sfParser) bare() (text string, n int64, ok bool) {
	n = absent
	if p.i == len(p.s) {
		return "", n, false
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		v := p.number()
		return "", v, p.ok()
	case c == '"':
		s, ok := p.str()
		return s, n, ok
	case c == '*' || isAlpha(c):
		return p.token(), n, true
	case c == ':':
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return "", n, false
		}
		for _, b := range []byte(p.s[p.i+1 : p.i+1+end]) {
			if !(isAlpha(b) || isDigit(b) || b == '+' || b == '/' || b == '=') {
				return "", n, false
			}
		}
		p.i += end + 2
		return "", n, true
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return "", n, true
		}
		return "", n, false
	case c == '@':
		p.i++
		p.number()
		return "", absent, p.ok()
	}
	return "", n, false
}

// number parses an Integer or Decimal, returning the value of a
// non-negative Integer and absent otherwise. A malformed number sets p.i to
// -1, which ok reports.
func (p *sfParser) number() int64 {
	neg := false
	if p.i < len(p.s) && p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	var v int64
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
		if p.i-start > 15 {
			p.i = -1
			return absent
		}
	}
	if p.i == start {
		p.i = -1
		return absent
	}
	if p.i < len(p.s) && p.s[p.i] == '.' { // Decimal: at most 12.3 digits
		if p.i-start > 12 {
			p.i = -1
			return absent
		}
		p.i++
		frac := p.i
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
		if p.i == frac || p.i-frac > 3 {
			p.i = -1
		}
		return absent
	}
	if neg {
		return absent
	}
	return v
}

func (p *sfParser) ok() bool { return p.i >= 0 }

// str parses a String, unescaping it only when it holds escapes.
func (p *sfParser) str() (string, bool) {
	p.i++ // opening quote
	start, escaped := p.i, false
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			if p.i+1 == len(p.s) || (p.s[p.i+1] != '"' && p.s[p.i+1] != '\\') {
				return "", false
			}
			escaped = true
			p.i += 2
			continue
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			if escaped {
				s = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(s)
			}
			return s, true
		case c < 0x20 || c > 0x7e:
			return "", false
		}
		p.i++
	}
	return "", false
}

// token parses a Token.
func (p *sfParser) token() string {
	start := p.i
	p.i++
	for p.i < len(p.s) && (isTChar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	return p.s[start:p.i]
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || 'A' <= c && c <= 'Z' }

// isTChar reports whether c is an RFC 9110 token character.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
