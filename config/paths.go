package config

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Routers do not agree on what a path that is not clean names. ServeMux
// redirects "//api/login" and "/api/./login" to "/api/login"; gin with
// RemoveExtraSlash, chi after CleanPath and most proxies (with path
// normalisation on) serve them from the "/api/login" route; a router that
// matches segments as written serves them from another route, or none.
// Likewise "/api%2Flogin" is "/api/login" to gin and to r.URL.Path, and one
// segment to ServeMux and chi. A rule that decided from one reading only
// could be walked around with another: a limit on "/api/login" skipped by
// "//api/login" behind a router that cleans paths, or an exemption on
// "/healthz" granted to "//healthz" behind a router that sends it elsewhere.
//
// So a request whose path has another reading is decided only when every
// reading matches the same rules; otherwise it is refused (the refuse
// group, a 400). The index's walk tells a clean path, which has one
// reading, at the cost of a length test per segment. A trailing slash is
// not a second reading: "/docs/" and "/docs" are different routes on
// ServeMux, and subtree routes ("/docs/*") cover both.

// group returns the group of r: the group of its path as written when
// every other reading of the path (see readings) matches the same rules,
// x.refuse when one does not.
func (x *index) group(r *http.Request) int32 {
	class := methodClass(r.Method)
	g, unclean := x.walk(class, r.URL.Path)
	if !unclean && r.URL.RawPath == "" {
		return g // the path has one reading
	}
	p := r.URL.Path
	for _, alt := range readings(r, unclean) {
		if ga, _ := x.walk(class, alt); !x.agree(g, ga, p, alt) {
			return x.refuse
		}
	}
	return g
}

// keepReadings keeps what group needs for paths with other readings: the
// routes of each entry, the entries of each group, and the refuse group
// after the file's groups.
func (x *index) keepReadings(entries []entry, groups []groupSpec) {
	x.routes = make([][]string, len(entries))
	for i := range entries {
		x.routes[i] = entries[i].routes
	}
	for _, g := range groups {
		x.members = append(x.members, g.entries)
	}
	x.refuse = int32(len(groups))
}

// agree reports whether paths p and alt, in groups g and ga, match the
// same rules: every rule of either group with routes matches both or
// neither. (A rule outside both groups matches neither, and the other
// conditions of a match do not depend on the path.)
func (x *index) agree(g, ga int32, p, alt string) bool {
	for _, grp := range [2]int32{g, ga} {
		if grp < 0 {
			continue
		}
		for _, e := range x.members[grp] {
			if rs := x.routes[e]; rs != nil && anyRoute(rs, p) != anyRoute(rs, alt) {
				return false
			}
		}
	}
	return true
}

func anyRoute(routes []string, p string) bool {
	for _, rt := range routes {
		if ok, _ := routeMatch(rt, p); ok {
			return true
		}
	}
	return false
}

// readings returns the readings of r's path other than r.URL.Path itself:
// its clean form when it is unclean (has an empty, "." or ".." segment),
// and its segments as sent when an escaped slash ("%2F") splits them
// otherwise.
func readings(r *http.Request, unclean bool) []string {
	var out []string
	p := r.URL.Path
	if unclean {
		c := path.Clean(p)
		if strings.HasSuffix(p, "/") && c != "/" {
			c += "/"
		}
		out = append(out, c)
	}
	if raw := r.URL.RawPath; strings.Contains(raw, "%2F") || strings.Contains(raw, "%2f") {
		out = append(out, segmentsAsSent(raw))
	}
	return out
}

// segmentsAsSent is the escaped path raw as ServeMux and chi match it:
// split at the slashes as sent, each segment unescaped, a slash that was
// escaped kept as "%2F" so that it splits nothing. A segment that does not
// unescape is kept as sent.
func segmentsAsSent(raw string) string {
	segs := strings.Split(raw, "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = strings.ReplaceAll(u, "/", "%2F")
		}
	}
	return strings.Join(segs, "/")
}
