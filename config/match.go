package config

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

// match compiles a rule's match conditions into one predicate, nil when
// there are none, and the rule's entry in the index. Every listed
// condition must hold: the method is one of methods, the path matches one
// of routes, every header in headers is present, and every predicate in
// when returns true. rest is the predicate of the conditions the index
// does not decide exactly (headers, when, routes with glob segments): in a
// Set, where the index has decided the others, it is all a rule checks.
func (c *compiler) match(f map[string]field, path string) (full, rest func(*http.Request) bool, e entry) {
	v, ok := f["match"]
	if !ok {
		return nil, nil, e
	}
	path += ".match"
	m := c.fields(v.val, path, "methods", "routes", "headers", "when")
	if m == nil {
		return nil, nil, e
	}
	var conds, undecided []func(*http.Request) bool
	if v, ok := m["methods"]; ok {
		list := c.strs(v.val, path+".methods")
		c.nonEmpty(v.val, path+".methods", "method")
		for i, s := range list {
			j := slices.Index(methods, s)
			if j < 0 {
				c.fail(elem(v.val, i), fmt.Sprintf("%s.methods[%d]", path, i), "unknown method %q (use upper case: %v)", s, methods)
				continue
			}
			e.methods |= 1 << j
		}
		conds = append(conds, func(r *http.Request) bool { return slices.Contains(list, r.Method) })
	}
	if v, ok := m["routes"]; ok {
		list := c.strs(v.val, path+".routes")
		c.nonEmpty(v.val, path+".routes", "path")
		for i, p := range list {
			if err := checkRoute(p); err != nil {
				c.fail(elem(v.val, i), fmt.Sprintf("%s.routes[%d]", path, i), "%v", err)
			}
		}
		e.routes = list
		if e.routes == nil {
			e.routes = []string{} // a list that failed: matches nothing
		}
		routes := func(r *http.Request) bool {
			for _, p := range list {
				if ok, _ := routeMatch(p, r.URL.Path); ok {
					return true
				}
			}
			return false
		}
		conds = append(conds, routes)
		if slices.ContainsFunc(list, globbed) {
			undecided = append(undecided, routes)
		}
	}
	if v, ok := m["headers"]; ok {
		list := c.strs(v.val, path+".headers")
		for i, h := range list {
			if strings.ContainsAny(h, " :\t\r\n") {
				c.fail(elem(v.val, i), fmt.Sprintf("%s.headers[%d]", path, i), "%q is not a header name", h)
			}
			list[i] = http.CanonicalHeaderKey(h)
		}
		headers := func(r *http.Request) bool {
			for _, h := range list {
				if len(r.Header[h]) == 0 {
					return false
				}
			}
			return true
		}
		conds, undecided = append(conds, headers), append(undecided, headers)
	}
	if v, ok := m["when"]; ok {
		for i, name := range c.strs(v.val, path+".when") {
			p := c.reg.Predicates[name]
			if p == nil {
				c.fail(elem(v.val, i), fmt.Sprintf("%s.when[%d]", path, i), "unknown predicate %q (the registry has %v)", name, sortedKeys(c.reg.Predicates))
				continue
			}
			conds, undecided = append(conds, p), append(undecided, p)
		}
	}
	return every(conds), every(undecided), e
}

// nonEmpty reports an empty list of methods or routes: it would match no
// request, while the index, which takes no methods for every method, would
// apply the rule to every method (an unlimited rule would exempt them all).
func (c *compiler) nonEmpty(n *yaml.Node, path, what string) {
	if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		c.fail(n, path, "an empty list matches no request: omit it to match every %s", what)
	}
}

// every returns the predicate that all of conds hold, nil for none.
func every(conds []func(*http.Request) bool) func(*http.Request) bool {
	switch len(conds) {
	case 0:
		return nil
	case 1:
		return conds[0]
	}
	return func(r *http.Request) bool {
		for _, ok := range conds {
			if !ok(r) {
				return false
			}
		}
		return true
	}
}

// globbed reports whether route p has a glob segment the index counts as
// any segment (all but a bare "*"), so that a rule must check it itself.
func globbed(p string) bool {
	if prefix, ok := strings.CutSuffix(p, "/*"); ok && !hasMeta(prefix) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if hasMeta(seg) && seg != "*" {
			return true
		}
	}
	return false
}

// elem is the i-th element of a list node, or the node itself for a scalar.
func elem(n *yaml.Node, i int) *yaml.Node {
	if n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i]
	}
	return n
}

// checkRoute checks a route pattern. Routes match segment by segment, so
// a character class may neither hold nor match "/".
func checkRoute(p string) error {
	if _, err := routeMatch(p, "/"); err != nil {
		return err
	}
	if strings.Contains(p, "\\/") {
		return fmt.Errorf("route %q: escaped /: routes match segment by segment", p)
	}
	for rest := p; ; {
		i := strings.IndexByte(rest, '[')
		if i < 0 {
			return nil
		}
		rest = rest[i:]
		end := strings.IndexByte(rest[1:], ']')
		if end < 0 {
			return nil // routeMatch reported it
		}
		class := rest[:end+2]
		if ok, _ := path.Match(class, "/"); ok || strings.Contains(class, "/") {
			return fmt.Errorf("route %q: class %s may not hold or match / (routes match segment by segment)", p, class)
		}
		rest = rest[end+2:]
	}
}

// routeMatch reports whether p matches the request path: a pattern ending
// in "/*" matches everything under its prefix; otherwise path.Match rules
// apply ("*" is one segment: "/users/*/posts").
func routeMatch(p, reqPath string) (bool, error) {
	if !strings.HasPrefix(p, "/") {
		return false, fmt.Errorf("route %q must start with /", p)
	}
	if prefix, ok := strings.CutSuffix(p, "/*"); ok && !strings.ContainsAny(prefix, "*?[\\") {
		return reqPath == prefix || strings.HasPrefix(reqPath, prefix+"/"), nil
	}
	ok, err := path.Match(p, reqPath)
	if err != nil {
		return false, fmt.Errorf("route %q: %v", p, err)
	}
	return ok, nil
}
