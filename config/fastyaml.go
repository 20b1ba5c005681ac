package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// fastParse parses the plain YAML most rules files are written in, to the
// node tree yaml.Unmarshal gives, several times faster: block mappings and
// lists, one-line flow lists and mappings, plain scalars and quoted
// scalars without escapes, comments. Anything else (anchors, tags, block
// or multi-line scalars, escapes, tabs, documents markers, plain scalars
// whose type it does not know for sure) makes it report false, and the
// file goes to the YAML parser. It never reports an error of its own.
func fastParse(data []byte) (*yaml.Node, bool) {
	p := &fastParser{}
	if !p.split(string(data)) || len(p.lines) == 0 {
		return nil, false
	}
	root, ok := p.block()
	if !ok || p.i != len(p.lines) {
		return nil, false
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: root.Line, Column: root.Column, Content: []*yaml.Node{root}}, true
}

type fastParser struct {
	lines []fline
	i     int
	slab  []yaml.Node // nodes are allocated from it, a block at a time
}

// node returns a new node holding n.
func (p *fastParser) node(n yaml.Node) *yaml.Node {
	if len(p.slab) == 0 {
		p.slab = make([]yaml.Node, 256)
	}
	nn := &p.slab[0]
	*nn = n
	p.slab = p.slab[1:]
	return nn
}

// fline is a line with content: its number, indentation and text (without
// the indentation, a trailing comment or trailing spaces).
type fline struct {
	no, ind int
	text    string
}

// maxFastLine is the longest line fastParse reads. The YAML parser takes a
// "key:" as a key only when the colon is within 1,024 characters of the
// key's start, and rejects nesting deeper than 10,000; lines of at most
// maxFastLine characters hold neither such a key nor, since each level of
// nesting takes a column, such nesting, which also bounds fastParse's
// recursion.
const maxFastLine = 1000

func (p *fastParser) split(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\n') || c >= 0x7f {
			return false // tabs, carriage returns, control and non-ASCII characters
		}
	}
	for no := 1; len(s) > 0; no++ {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if len(line) > maxFastLine {
			return false // a key may be too long to be one; deep nesting
		}
		text := strings.TrimLeft(line, " ")
		ind := len(line) - len(text)
		if text == "" || text[0] == '#' {
			continue
		}
		if i := strings.Index(text, " #"); i >= 0 {
			if strings.ContainsAny(text[:i], `'"`) {
				return false // the comment may be inside a quoted scalar
			}
			text = text[:i]
		}
		text = strings.TrimRight(text, " ")
		if strings.HasPrefix(text, "---") || strings.HasPrefix(text, "...") {
			return false
		}
		p.lines = append(p.lines, fline{no, ind, text})
	}
	return true
}

func isItem(t string) bool { return t == "-" || strings.HasPrefix(t, "- ") }

// block parses the node that starts at the current line.
func (p *fastParser) block() (*yaml.Node, bool) {
	l := p.lines[p.i]
	switch {
	case isItem(l.text):
		return p.list(l.ind)
	case keyEnd(l.text) > 0:
		return p.mapping(l.ind)
	}
	n, ok := p.value(l.text, l.no, l.ind+1)
	p.i++
	return n, ok
}

func (p *fastParser) list(ind int) (*yaml.Node, bool) {
	l := p.lines[p.i]
	seq := p.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: l.no, Column: ind + 1})
	for p.i < len(p.lines) && p.lines[p.i].ind == ind && isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		var item *yaml.Node
		var ok bool
		if l.text == "-" {
			p.i++
			if p.i < len(p.lines) && p.lines[p.i].ind > ind {
				item, ok = p.block()
			} else {
				item, ok = p.node(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: l.no, Column: ind + 2}), true
			}
		} else {
			rest := strings.TrimLeft(l.text[2:], " ")
			col := ind + len(l.text) - len(rest)
			p.lines[p.i] = fline{l.no, col, rest} // the item's node starts here
			item, ok = p.block()
		}
		if !ok {
			return nil, false
		}
		seq.Content = append(seq.Content, item)
	}
	return seq, p.i == len(p.lines) || p.lines[p.i].ind <= ind
}

func (p *fastParser) mapping(ind int) (*yaml.Node, bool) {
	l := p.lines[p.i]
	m := p.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: l.no, Column: ind + 1})
	for p.i < len(p.lines) && p.lines[p.i].ind == ind && !isItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		k := keyEnd(l.text)
		if k <= 0 {
			return nil, false
		}
		key, ok := p.value(strings.TrimRight(l.text[:k], " "), l.no, ind+1)
		if !ok || key.Kind != yaml.ScalarNode {
			return nil, false
		}
		rest := strings.TrimLeft(l.text[k+1:], " ")
		var val *yaml.Node
		p.i++
		switch {
		case rest != "":
			val, ok = p.value(rest, l.no, ind+len(l.text)-len(rest)+1)
		case p.i < len(p.lines) && p.lines[p.i].ind > ind:
			val, ok = p.block()
		case p.i < len(p.lines) && p.lines[p.i].ind == ind && isItem(p.lines[p.i].text):
			val, ok = p.list(ind)
		default:
			val = p.node(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: l.no, Column: ind + k + 2})
		}
		if !ok {
			return nil, false
		}
		m.Content = append(m.Content, key, val)
	}
	return m, p.i == len(p.lines) || p.lines[p.i].ind < ind
}

// keyEnd returns where the colon of a "key: value" line is, 0 when t is
// not one.
func keyEnd(t string) int {
	if t == "" || strings.ContainsRune("[{'\"-:#,", rune(t[0])) && !(t[0] == '-' && len(t) > 1 && t[1] != ' ') {
		return 0
	}
	for i := 1; i < len(t); i++ {
		if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ') {
			return i
		}
	}
	return 0
}

// value parses a one-line value at column col: a flow list or mapping, a
// quoted scalar or a plain scalar.
func (p *fastParser) value(t string, line, col int) (*yaml.Node, bool) {
	if t[0] == '[' || t[0] == '{' {
		n, rest, ok := p.flow(t, line, col)
		return n, ok && rest == ""
	}
	if t[0] == '\'' || t[0] == '"' {
		n, rest, ok := p.quoted(t, line, col)
		return n, ok && rest == ""
	}
	if strings.Contains(t, ": ") || strings.HasSuffix(t, ":") || strings.Contains(t, " #") {
		return nil, false
	}
	return p.plain(t, line, col)
}

func (p *fastParser) quoted(t string, line, col int) (*yaml.Node, string, bool) {
	q := t[0]
	end := strings.IndexByte(t[1:], q)
	if end < 0 || (q == '\'' && end+2 < len(t) && t[end+2] == '\'') {
		return nil, "", false // unterminated, or an escaped quote
	}
	if q == '"' && strings.IndexByte(t[1:end+1], '\\') >= 0 {
		return nil, "", false // an escape
	}
	style := yaml.DoubleQuotedStyle
	if q == '\'' {
		style = yaml.SingleQuotedStyle
	}
	return p.node(yaml.Node{Kind: yaml.ScalarNode, Style: style, Tag: "!!str", Value: t[1 : end+1], Line: line, Column: col}), t[end+2:], true
}

// plain resolves a plain scalar's type as the YAML parser does, for the
// forms it is sure of.
func (p *fastParser) plain(t string, line, col int) (*yaml.Node, bool) {
	n := p.node(yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Line: line, Column: col})
	c := t[0]
	if (c == '-' || c == '?' || c == ':') && (len(t) == 1 || t[1] == ' ') {
		return nil, false // an indicator
	}
	switch {
	case c == '~' || t == "null" || t == "Null" || t == "NULL":
		n.Tag = "!!null"
		return n, t == "~" || c != '~'
	case t == "true" || t == "True" || t == "TRUE" || t == "false" || t == "False" || t == "FALSE":
		n.Tag = "!!bool"
	case c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.':
		digits := strings.TrimLeft(t, "+-")
		switch {
		case len(t)-len(digits) <= 1 && digits != "" && strings.Trim(digits, "0123456789") == "":
			if len(digits) > 18 || (digits[0] == '0' && digits != "0") {
				return nil, false // octal, a float, or too long for an int
			}
			n.Tag = "!!int"
		case strings.Trim(t, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+-.:_ ") != "":
			// A character no number or time holds: a string.
		case strings.Contains(strings.ToLower(t), ".inf") || strings.Contains(strings.ToLower(t), ".nan") ||
			strings.Trim(t, "0123456789abcdefABCDEFxXoOtTzZ+-.:_ ") == "":
			return nil, false // a number or a time, maybe
		}
	case strings.IndexByte("&*!|>%@`?<=#,[]{}", c) >= 0:
		return nil, false // an indicator
	}
	return n, true
}

// flow parses a one-line flow list or mapping at the start of t, and
// returns what follows it.
func (p *fastParser) flow(t string, line, col int) (*yaml.Node, string, bool) {
	open := t[0]
	n := p.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle, Line: line, Column: col})
	closer := byte(']')
	if open == '{' {
		n.Kind, n.Tag, closer = yaml.MappingNode, "!!map", '}'
	}
	rest := t[1:]
	for first := true; ; first = false {
		skip := len(rest) - len(strings.TrimLeft(rest, " "))
		rest = rest[skip:]
		if rest == "" {
			return nil, "", false
		}
		if rest[0] == closer {
			return n, rest[1:], first || true
		}
		if !first {
			if rest[0] != ',' {
				return nil, "", false
			}
			rest = strings.TrimLeft(rest[1:], " ")
			if rest == "" || rest[0] == closer {
				return nil, "", false // a trailing comma
			}
		}
		at := col + len(t) - len(rest)
		elem, r, ok := p.flowElem(rest, line, at, open == '{')
		if !ok {
			return nil, "", false
		}
		rest = r
		if open == '{' {
			if !strings.HasPrefix(rest, ": ") || elem.Kind != yaml.ScalarNode {
				return nil, "", false
			}
			rest = strings.TrimLeft(rest[2:], " ")
			var val *yaml.Node
			val, rest, ok = p.flowElem(rest, line, col+len(t)-len(rest), false)
			if !ok {
				return nil, "", false
			}
			n.Content = append(n.Content, elem, val)
		} else {
			n.Content = append(n.Content, elem)
		}
	}
}

// flowElem parses one element of a flow collection; a key stops at ": ".
func (p *fastParser) flowElem(t string, line, col int, key bool) (*yaml.Node, string, bool) {
	if t == "" {
		return nil, "", false
	}
	switch t[0] {
	case '[', '{':
		return p.flow(t, line, col)
	case '\'', '"':
		return p.quoted(t, line, col)
	}
	end := strings.IndexAny(t, ",[]{}")
	if end < 0 {
		end = len(t)
	}
	if i := strings.Index(t, ": "); key && i >= 0 && i < end {
		end = i
	}
	s := strings.TrimRight(t[:end], " ")
	if s == "" || strings.ContainsAny(s, ":#") {
		return nil, "", false
	}
	n, ok := p.plain(s, line, col)
	return n, t[len(s):], ok
}
