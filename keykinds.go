package ratelimit

import (
	"net/http"
	"reflect"
)

// builtinKinds maps the code of each built-in key function to the key kind
// its rules report in events and metrics when the Rule sets no KeyKind. A
// KeyFunc is a plain func value, so the kind cannot travel with it: the
// closures each constructor returns share one code pointer, which is what
// is looked up. The map is built once, when the package is initialised, and
// only read afterwards. (A constructor whose closure literal could be
// inlined into its caller would get a new code pointer there; the tests call
// every constructor from another package to catch it.)
var builtinKinds = map[uintptr]string{
	codeOf(ByIP()): "ip",
	codeOf(ClientIPConfig{Hops: 1}.KeyFunc()):                                   "client_ip",
	codeOf(ByHeader("X-Kind")):                                                  "header",
	codeOf(ByUser(func(*http.Request) (string, bool) { return "", false })):     "user",
	codeOf(ByRoute()):                                                           "route",
	codeOf(ByRouteFunc(func(*http.Request) string { return "" })):               "route",
	codeOf(ByRouteFunc(func(*http.Request) (string, error) { return "", nil })): "route", // each instantiation has its own code
	codeOf(ByBearerToken()):                                                     "bearer",
	codeOf(ByAPIKey("X-Kind")):                                                  "api_key",
}

// codeOf returns the entry point of f's code, shared by every closure made
// from the same function literal.
func codeOf(f KeyFunc) uintptr { return reflect.ValueOf(f).Pointer() }

// keyKindOf returns the kind of a built-in key function, or "key".
func keyKindOf(f KeyFunc) string {
	if k, ok := builtinKinds[codeOf(f)]; ok {
		return k
	}
	return "key"
}
