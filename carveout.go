package ratelimit

import (
	"fmt"
	"net/http"
	"path"
	"strings"
)

// carveOuts is the set of paths that pass unlimited (WithCarveOuts) and the
// rule that decides whether a request is one of them: a request skips the
// limiter only when it will certainly be served by the handler the router
// has for that path. When in doubt, it is limited.
//
// The zero value carves out nothing. A carveOuts is immutable once built
// and safe for concurrent use.
type carveOuts struct {
	paths  map[string]struct{}
	maxLen int // the longest path: longer ones cannot match
	// second has bit b set when some carve-out's byte after the leading
	// slash is b: a cheap test that turns most paths away before the map
	// lookup ("/api/..." against "/healthz", "/livez", "/readyz", "/metrics").
	second [4]uint64
	short  bool // some carve-out is shorter than 2 bytes
}

// routing is what the limiter knows of how a request is routed.
type routing struct {
	mux    *http.ServeMux // the ServeMux that Handler wraps, if any
	route  string         // the route the router matched, when routed
	routed bool           // an adapter told the route (AdmitRoute)
}

func newCarveOuts(paths []string) carveOuts {
	if len(paths) == 0 {
		return carveOuts{}
	}
	c := carveOuts{paths: make(map[string]struct{}, len(paths))}
	for _, p := range paths {
		c.paths[p] = struct{}{}
		c.maxLen = max(c.maxLen, len(p))
		if len(p) > 1 {
			c.second[p[1]>>6] |= 1 << (p[1] & 63)
		} else {
			c.short = true
		}
	}
	return c
}

func (c *carveOuts) has(p string) bool {
	if !c.may(p) {
		return false
	}
	_, ok := c.paths[p]
	return ok
}

// may is a cheap test that p may be a carve-out: false means it is not.
func (c *carveOuts) may(p string) bool {
	if len(p) > c.maxLen {
		return false
	}
	if len(p) < 2 {
		return c.short
	}
	return c.second[p[1]>>6]&(1<<(p[1]&63)) != 0
}

// match reports whether r is carved out:
//
//   - only GET and HEAD requests are;
//   - when an adapter tells the route it matched (AdmitRoute), the route
//     must be exactly a carve-out; the path is not read;
//   - when a router has matched r before the middleware ran
//     (Request.Pattern, set by ServeMux and chi), the pattern's path must
//     be exactly a carve-out, and so must the request's path;
//   - otherwise the path must be exactly a carve-out as sent: already
//     clean, no escaping (URL.RawPath empty), no trailing or doubled slash;
//   - and then, when Handler wraps a ServeMux, the ServeMux is asked which
//     pattern would serve r: it must be the carve-out's own (ServeMux
//     serves HEAD from a GET pattern, so HEAD qualifies); with any other
//     router, which may not serve HEAD from GET, only GET qualifies.
func (c *carveOuts) match(r *http.Request, rt routing) bool {
	if c.paths == nil {
		return false
	}
	// Unless an adapter tells the route, the request's path must be a
	// carve-out whatever else holds (see below): test it first and
	// cheaply, so that most requests touch nothing else of r.
	if !rt.routed && (r.URL == nil || !c.may(r.URL.Path)) {
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch {
	case rt.routed:
		return rt.route != "" && c.has(rt.route)
	case r.Pattern != "":
		// chi trims a trailing slash off the pattern it reports ("/healthz/"
		// reads "/healthz"): the path must be the pattern's own text too.
		p := patternPath(r.Pattern)
		return c.has(p) && r.URL.Path == p
	}
	p := r.URL.Path
	if r.URL.RawPath != "" || r.URL.Opaque != "" || !c.has(p) {
		return false
	}
	if rt.mux != nil {
		_, pattern := rt.mux.Handler(r)
		return patternPath(pattern) == p
	}
	return r.Method == http.MethodGet
}

// patternPath returns the path part of a route pattern. ServeMux patterns
// may start with a method and a host ("GET example.com/healthz"); chi, gin
// and echo patterns are paths. A pattern with no path gives "".
func patternPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	if i := strings.IndexAny(p, " \t"); i >= 0 && !strings.Contains(p[:i], "/") {
		p = strings.TrimLeft(p[i:], " \t") // a method
	}
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[i:] // after a host, if any
	}
	return ""
}

// checkCarveOut panics unless p can be a carve-out: a literal, clean,
// absolute path of unreserved characters (RFC 3986), so that it never reads
// as a route pattern with wildcards ("{id}", ":id", "*") nor needs
// escaping, and is not a subtree ("/", "/static/").
func checkCarveOut(p string) {
	bad := len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' || path.Clean(p) != p
	for i := 0; i < len(p) && !bad; i++ {
		b := p[i]
		bad = !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			b == '/' || b == '-' || b == '.' || b == '_' || b == '~')
	}
	if bad {
		panic(fmt.Sprintf("ratelimit: WithCarveOuts(%q): a carve-out is a clean absolute path of letters, digits and -._~/, with no trailing slash", p))
	}
}
