package config

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The index sends each request to the group of rules that can apply to it,
// so that a file holds any number of rules while each request is checked
// against a few. It is built once per file: a trie of the rules' route
// patterns, segment by segment, made deterministic (each state is a set of
// trie nodes and the subtree rules in force), so that routing a request is
// one map access per path segment and one array access for the method.
//
// A glob segment ("v1*", "?", "[ab]") is indexed as "*", any segment: the
// group then holds every rule the request could match, and each rule checks
// its own routes exactly. Literal, "*" and subtree ("/api/*") patterns are
// indexed exactly.

// nMethods is the number of method classes: the methods a match may name,
// then every other method.
var nMethods = len(methods) + 1

func methodClass(m string) int {
	switch m {
	case "GET":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "PATCH":
		return 4
	case "DELETE":
		return 5
	case "OPTIONS":
		return 6
	case "CONNECT":
		return 7
	case "TRACE":
		return 8
	}
	return 9
}

// entry is one rule of the file as the index sees it.
type entry struct {
	methods uint16   // bit i: methods[i]; 0: every method
	routes  []string // nil: every path
	limited bool     // a limited rule, counted against maxRules
}

func (e *entry) takes(class int) bool {
	return e.methods == 0 || (class < len(methods) && e.methods&(1<<class) != 0)
}

// index maps a request to a group: an index into Set.groups, or -1 when
// no rule can apply. Set.groups has one more entry than the groups of the
// file, at index refuse.
type index struct {
	states []dstate
	bare   []int32 // groups of paths that do not start with "/", by method class

	// For requests whose path is not clean (see paths.go): the routes of
	// each entry (nil: every path), the entries of each group, and the
	// group that refuses a request its path's spellings would split.
	routes  [][]string
	members [][]int32
	refuse  int32
}

type dstate struct {
	lit   map[string]int32 // next state by segment
	other int32            // next state for any other segment
	end   []int32          // group when the path ends here, by method class
}

// walk returns the group of a request of method class class for path p,
// as the path is written, and whether p has an empty, "." or ".." segment
// (a trailing slash aside): see group in paths.go for such paths.
func (x *index) walk(class int, p string) (g int32, unclean bool) {
	if p == "" {
		return x.states[0].end[class], false // only "/*" matches the empty path
	}
	if p[0] != '/' {
		return x.bare[class], false
	}
	st := &x.states[0]
	rest := p[1:]
	for {
		i := strings.IndexByte(rest, '/')
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if len(seg) <= 2 && (i >= 0 && seg == "" || seg == "." || seg == "..") {
			unclean = true
		}
		next, ok := st.lit[seg]
		if !ok {
			next = st.other
		}
		st = &x.states[next]
		if i < 0 {
			return st.end[class], unclean
		}
		rest = rest[i+1:]
	}
}

// tnode is a node of the route trie.
type tnode struct {
	id      int32
	lit     map[string]*tnode
	wild    *tnode
	exact   []int32 // entries with a route ending here
	subtree []int32 // entries with a route covering this node's subtree
}

// groupSpec is a distinct set of entries, with a request that reaches it.
type groupSpec struct {
	entries []int32 // ascending
	example string  // e.g. "GET /api/x"
}

// maxStates bounds the index: route patterns whose combinations exceed it
// are rejected rather than indexed in exponential time.
const maxStates = 1 << 16

// maxOverGroups is how many groups over the bound on the rules a request
// can match the index collects before it stops: such a file is rejected
// anyway, and building on would cost time and memory in proportion to the
// states times the rules every request matches (a 0.8 MB file of 2,000
// rules matching every request and 10,000 routes took 7 s and 240 MB).
const maxOverGroups = 16

// errOverBound stops buildIndex once it has maxOverGroups groups over the
// bound; the groups it returns hold them.
var errOverBound = errors.New("too many groups over the bound")

// buildIndex builds the index of entries and the groups it routes to.
func buildIndex(entries []entry) (*index, []groupSpec, error) {
	b := &indexBuilder{entries: entries, root: &tnode{}, groupID: map[string]int32{}, stateID: map[string]int32{}}
	b.nodes = 1
	for i := range entries {
		if entries[i].routes == nil {
			b.anyPath = append(b.anyPath, int32(i))
			continue
		}
		for _, p := range entries[i].routes {
			b.insert(p, int32(i))
		}
	}
	x := &index{bare: b.ends(nil, nil, "*")}
	type pending struct {
		nodes []*tnode
		sub   []int32
		path  string
	}
	queue := []pending{{nodes: []*tnode{b.root}, sub: b.root.subtree, path: ""}}
	b.stateID[stateKey(queue[0].nodes, queue[0].sub)] = 0
	x.states = append(x.states, dstate{})
	for q := 0; q < len(queue); q++ {
		cur := queue[q]
		st := dstate{}
		st.end = b.ends(cur.nodes, cur.sub, cmpPath(cur.path))
		if b.over >= maxOverGroups {
			return nil, b.groups, errOverBound
		}
		next := func(nodes []*tnode, seg string) int32 {
			sub := cur.sub
			for _, n := range nodes {
				sub = union(sub, n.subtree)
			}
			k := stateKey(nodes, sub)
			if id, ok := b.stateID[k]; ok {
				return id
			}
			id := int32(len(x.states))
			b.stateID[k] = id
			x.states = append(x.states, dstate{})
			queue = append(queue, pending{nodes: nodes, sub: sub, path: cur.path + "/" + seg})
			return id
		}
		var wild []*tnode
		var lits []string
		for _, n := range cur.nodes {
			if n.wild != nil {
				wild = append(wild, n.wild)
			}
			for s := range n.lit {
				lits = append(lits, s)
			}
		}
		slices.Sort(lits)
		lits = slices.Compact(lits)
		if len(lits) > 0 {
			st.lit = make(map[string]int32, len(lits))
		}
		for _, s := range lits {
			var nodes []*tnode
			for _, n := range cur.nodes {
				if c := n.lit[s]; c != nil {
					nodes = append(nodes, c)
				}
			}
			st.lit[s] = next(sortNodes(append(nodes, wild...)), s)
		}
		st.other = next(sortNodes(wild), otherSegment(lits))
		if len(x.states) > maxStates {
			return nil, nil, fmt.Errorf("the route patterns combine into more than %d path classes: use fewer wildcard segments", maxStates)
		}
		x.states[q] = st
	}
	x.keepReadings(entries, b.groups)
	return x, b.groups, nil
}

type indexBuilder struct {
	entries []entry
	root    *tnode
	nodes   int32
	anyPath []int32 // entries without routes
	groups  []groupSpec
	groupID map[string]int32
	stateID map[string]int32
	key     []byte
	over    int // groups with more than maxRules limited, or unlimited, entries
}

// insert adds route p of entry e to the trie.
func (b *indexBuilder) insert(p string, e int32) {
	prefix, sub := strings.CutSuffix(p, "/*")
	if !sub || hasMeta(prefix) {
		prefix = p
		sub = false
	}
	n := b.root
	if prefix != "" {
		for _, seg := range strings.Split(prefix[1:], "/") {
			n = b.child(n, seg)
		}
	}
	// Two routes of one rule can end at one node ("/a/v1*" and "/a/v2*"
	// are both "/a/*" here): the rule is there once. Entries are inserted
	// in order, so a repeat is the last one.
	list := &n.exact
	if sub {
		list = &n.subtree
	}
	if k := len(*list); k == 0 || (*list)[k-1] != e {
		*list = append(*list, e)
	}
}

func (b *indexBuilder) child(n *tnode, seg string) *tnode {
	if hasMeta(seg) {
		if n.wild == nil {
			n.wild = &tnode{id: b.nodes}
			b.nodes++
		}
		return n.wild
	}
	if n.lit == nil {
		n.lit = map[string]*tnode{}
	}
	c := n.lit[seg]
	if c == nil {
		c = &tnode{id: b.nodes}
		b.nodes++
		n.lit[seg] = c
	}
	return c
}

// ends returns, for each method class, the group of a path ending at nodes
// with the subtree entries sub in force.
func (b *indexBuilder) ends(nodes []*tnode, sub []int32, path string) []int32 {
	all := union(b.anyPath, sub)
	for _, n := range nodes {
		all = union(all, n.exact)
	}
	out := make([]int32, nMethods)
	var set []int32
	for class := range nMethods {
		set = set[:0]
		for _, e := range all {
			if b.entries[e].takes(class) {
				set = append(set, e)
			}
		}
		method := "OTHER"
		if class < len(methods) {
			method = methods[class]
		}
		out[class] = b.group(set, method+" "+path)
	}
	return out
}

// group returns the ID of the group of entries set, adding it if new; -1
// for no entries.
func (b *indexBuilder) group(set []int32, example string) int32 {
	if len(set) == 0 {
		return -1
	}
	b.key = b.key[:0]
	for _, e := range set {
		b.key = binary.AppendUvarint(b.key, uint64(e))
	}
	if id, ok := b.groupID[string(b.key)]; ok {
		return id
	}
	id := int32(len(b.groups))
	b.groupID[string(b.key)] = id
	limited := 0
	for _, e := range set {
		if b.entries[e].limited {
			limited++
		}
	}
	if limited > maxRules || len(set)-limited > maxRules {
		b.over++
	}
	b.groups = append(b.groups, groupSpec{entries: slices.Clone(set), example: example})
	return id
}

func stateKey(nodes []*tnode, sub []int32) string {
	k := make([]byte, 0, 4*(len(nodes)+len(sub))+2)
	k = binary.AppendUvarint(k, uint64(len(nodes)))
	for _, n := range nodes {
		k = binary.AppendUvarint(k, uint64(n.id))
	}
	for _, e := range sub {
		k = binary.AppendUvarint(k, uint64(e))
	}
	return string(k)
}

func sortNodes(ns []*tnode) []*tnode {
	slices.SortFunc(ns, func(a, b *tnode) int { return int(a.id - b.id) })
	return slices.CompactFunc(ns, func(a, b *tnode) bool { return a == b })
}

// union returns the ascending union of ascending a and b, a itself when b
// adds nothing.
func union(a, b []int32) []int32 {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// otherSegment is a segment unlike every literal of lits, for examples.
func otherSegment(lits []string) string {
	s := "x"
	for slices.Contains(lits, s) {
		s += "x"
	}
	return s
}

func cmpPath(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }
