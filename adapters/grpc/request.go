package ratelimitgrpc

import (
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// newRequest returns the HTTP/2 request an RPC to fullMethod is, for the
// limiter's key functions: the peer's address, the incoming metadata as
// header fields, POST, and the full method name as path and pattern. The
// method name is used as is, never parsed.
func newRequest(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx)
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Path: fullMethod},
		RequestURI: fullMethod,
		Pattern:    fullMethod,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     make(http.Header, len(md)),
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		r.RemoteAddr = p.Addr.String()
	}
	for k, vs := range md {
		if strings.HasPrefix(k, ":") {
			if k == ":authority" && len(vs) > 0 {
				r.Host = vs[0]
			}
			continue // other pseudo-headers are not fields
		}
		// Metadata keys are lowercase; http.Header keys canonical, as
		// net/http stores received fields. Two spellings of one key
		// cannot both occur, so nothing is overwritten.
		r.Header[textproto.CanonicalMIMEHeaderKey(k)] = vs
	}
	return r.WithContext(ctx)
}
