package envoy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Service answers Envoy's ShouldRateLimit calls
// (envoy.service.ratelimit.v3.RateLimitService) from Rules and a
// ratelimit.Store. Register it on a grpc.Server with Register.
//
// Each descriptor of a request is looked up in the request's domain as
// the reference does, and every descriptor a limit applies to is charged
// its hits (the descriptor's hits_addend, else the request's, else 1),
// whether or not another descriptor is over its limit. The overall code is
// OVER_LIMIT when any descriptor whose limit is enforced (not in shadow or
// quota mode) is over.
//
// A Service is safe for concurrent use. SetRules swaps the rules in force
// atomically: a call in progress finishes under the rules it started with.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	rules atomic.Pointer[Rules]
	store ratelimit.Store
	opts  options
	stats counters
}

// New returns a Service serving rules (nil: none yet; calls fail with
// UNAVAILABLE until SetRules) from store.
func New(rules *Rules, store ratelimit.Store, opts ...Option) (*Service, error) {
	if nilStore(store) {
		return nil, errors.New("ratelimit: envoy.New needs a store")
	}
	s := &Service{store: store, opts: options{clock: stores.SystemClock(), headers: true}}
	for _, o := range opts {
		if err := o(&s.opts); err != nil {
			return nil, err
		}
	}
	if err := s.SetRules(rules); err != nil {
		return nil, err
	}
	return s, nil
}

// Register registers the service on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { pb.RegisterRateLimitServiceServer(r, s) }

// SetRules puts rules in force for the calls that start after it returns.
// It refuses, keeping the rules in force, rules the service's algorithm
// cannot count (a SlidingLog limit above stores.MaxSlidingLog), with each
// such limit's file:line:col. A nil r changes nothing.
func (s *Service) SetRules(r *Rules) error {
	if r == nil {
		return nil
	}
	if err := r.countable(s.opts.alg); err != nil {
		return err
	}
	s.rules.Store(r)
	return nil
}

// Rules returns the rules in force, or nil.
func (s *Service) Rules() *Rules { return s.rules.Load() }

// outcome is the decision on one descriptor of a request.
type outcome struct {
	limit   *limit          // nil: no limit applies (or an unlimited one)
	rate    ratelimit.Limit // the limit as counted (a fallback's share)
	key     string
	hits    uint64
	res     ratelimit.Result
	decided bool  // res holds a decision
	shadow  bool  // shadow or quota mode: reported OK whatever the result
	err     error // the store's, when it could not decide
	// unlimited: an unlimited limit applies (limit is then nil).
	unlimited bool
}

// ShouldRateLimit decides a request's descriptors.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	s.stats.calls.Add(1)
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "ratelimit: the rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ratelimit: the descriptor list must not be empty")
	}
	rules := s.rules.Load()
	if rules == nil {
		return nil, status.Error(codes.Unavailable, "ratelimit: no rate limit configuration loaded")
	}
	outs := make([]outcome, len(req.Descriptors))
	s.limitsToCheck(rules, req, outs)
	if err := s.countableOverrides(outs); err != nil {
		return nil, err
	}
	if s.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.timeout)
		defer cancel()
	}
	s.decideAll(ctx, req.Domain, outs)
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(outs))}
	for i := range outs {
		o := &outs[i]
		if o.err != nil && s.opts.failure.mode == failError && !o.shadow && !s.opts.shadow {
			return nil, status.Errorf(codes.Unavailable, "ratelimit: store failed: %v", o.err)
		}
		st := s.descriptorStatus(o)
		if st.Code == pb.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses[i] = st
	}
	if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		s.stats.overLimit.Add(1)
		if s.opts.shadow {
			resp.OverallCode = pb.RateLimitResponse_OK
		}
	}
	if s.opts.headers {
		resp.ResponseHeadersToAdd = headers(outs, s.opts.alg)
	}
	return resp, nil
}

// limitsToCheck fills outs with the limit and hits of each descriptor and
// drops the limits another one replaces, as the reference does, and marks
// the unlimited descriptors.
func (s *Service) limitsToCheck(rules *Rules, req *pb.RateLimitRequest, outs []outcome) {
	var replacing map[string]bool
	for i, d := range req.Descriptors {
		m := rules.lookup(req.Domain, d)
		if m.limit == nil {
			continue
		}
		for _, r := range m.limit.replaces {
			if replacing == nil {
				replacing = make(map[string]bool)
			}
			replacing[r] = true
		}
		if m.limit.unlimited {
			outs[i].unlimited = true
			continue
		}
		outs[i] = outcome{limit: m.limit, rate: m.limit.rate(), key: storeKey(bucketKey(d, m.shared)),
			hits: hitsOf(req, d), shadow: m.limit.shadow || m.limit.quota}
	}
	for i := range outs {
		if l := outs[i].limit; l != nil && l.name != "" && replacing[l.name] {
			outs[i] = outcome{}
		}
	}
}

// countableOverrides refuses, as the gateway's misconfiguration, a limit
// override the service's algorithm cannot count: the configured limits
// were checked when they were put in force, an override comes with each
// request.
func (s *Service) countableOverrides(outs []outcome) error {
	if s.opts.alg != ratelimit.SlidingLog {
		return nil
	}
	for i := range outs {
		if l := outs[i].limit; l != nil && l.rpu > stores.MaxSlidingLog {
			return status.Errorf(codes.InvalidArgument, "ratelimit: the limit override of descriptor %d, %d requests per %s, is more than a sliding log keeps (%d)",
				i, l.rpu, strings.ToLower(l.unit.String()), stores.MaxSlidingLog)
		}
	}
	return nil
}

// hitsOf is the descriptor's hits_addend when set (zero checks without
// charging), else the request's, else 1.
func hitsOf(req *pb.RateLimitRequest, d *rlpb.RateLimitDescriptor) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return uint64(max(1, req.GetHitsAddend()))
}

// maxParallelDescriptors bounds the goroutines one call uses to decide its
// descriptors: a gateway sends a handful, but a request is not trusted to
// be small.
const maxParallelDescriptors = 16

// decideAll decides every limited descriptor, at once: each is charged
// whatever the others' decisions, and a store that coalesces (Redis) sends
// them in one round trip. At most maxParallelDescriptors are in flight.
func (s *Service) decideAll(ctx context.Context, domain string, outs []outcome) {
	limited, last := 0, 0
	for i := range outs {
		if outs[i].limit != nil {
			limited, last = limited+1, i
		}
	}
	if limited <= 1 { // nothing to do at once: no closure, no counter
		if limited == 1 {
			s.decide(ctx, domain, &outs[last])
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := next.Add(1) - 1; i < int64(len(outs)); i = next.Add(1) - 1 {
			if outs[i].limit != nil {
				s.decide(ctx, domain, &outs[i])
			}
		}
	}
	var wg sync.WaitGroup
	for range min(limited, maxParallelDescriptors) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// decide asks the store about one descriptor, and applies the failure
// policy when it cannot answer.
func (s *Service) decide(ctx context.Context, domain string, o *outcome) {
	observed := len(s.opts.observers) > 0
	if o.limit.rpu == 0 || o.hits > math.MaxInt32 || !s.opts.reference && o.hits > uint64(o.limit.rpu) {
		o.res, o.decided = s.neverFits(o), true
		if observed && o.hits > 0 {
			s.observe(o, ratelimit.OutcomeCostExceeded, 0, fmt.Errorf("%w: %d hits exceed the limit of %d", ratelimit.ErrInvalidRequest, o.hits, o.limit.rpu))
		}
		return
	}
	req := stores.Request{Rule: domain, Key: o.key, Limit: o.rate, Algorithm: s.opts.alg, Cost: int(o.hits), Force: s.opts.reference}
	var start time.Time
	if observed {
		start = time.Now()
	}
	res, err := s.store.Take(ctx, req)
	var lat time.Duration
	if observed {
		lat = time.Since(start)
	}
	if err == nil {
		o.res, o.decided = res, true
		if observed {
			s.observeDecision(o, lat)
		}
		return
	}
	s.stats.storeErrors.Add(1)
	o.err = fmt.Errorf("ratelimit: envoy descriptor %s: %w", o.limit.fullKey, err)
	if s.opts.failure.mode == failFallback && s.fallback(ctx, o, req) {
		if observed {
			s.observe(o, ratelimit.OutcomeFallback, lat, o.err)
			s.observeDecision(o, lat)
		}
		o.err = nil
		return
	}
	if observed {
		s.observe(o, ratelimit.OutcomeStoreError, lat, o.err)
	}
}

// fallback decides o on the fallback store, under the policy's share of
// the limit, and reports whether it could.
func (s *Service) fallback(ctx context.Context, o *outcome, req stores.Request) bool {
	req.Limit = s.opts.failure.share(o.rate)
	res := s.neverFits(o) // the share is smaller than the hits
	if s.opts.reference || req.Cost <= req.Limit.Rate {
		var err error
		if res, err = s.opts.failure.fallback.Take(ctx, req); err != nil {
			return false
		}
	}
	o.res, o.rate, o.decided = res, req.Limit, true
	s.stats.fallbacks.Add(1)
	return true
}

// neverFits is the decision on hits that no window of the limit can hold
// (a limit of 0 requests, more hits than the limit): denied without asking
// the store, unless there is nothing to charge.
func (s *Service) neverFits(o *outcome) ratelimit.Result {
	p := o.limit.period()
	return ratelimit.Result{Allowed: o.hits == 0, Limit: o.rate, RetryAfter: p, ResetAfter: p}
}

// descriptorStatus is the status of one descriptor in the response.
func (s *Service) descriptorStatus(o *outcome) *pb.RateLimitResponse_DescriptorStatus {
	switch {
	case o.unlimited:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
	case o.limit == nil:
		return &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
	case !o.decided: // the store failed and the policy decides
		code := pb.RateLimitResponse_OK
		if s.opts.failure.mode == failClosed && !o.shadow {
			code = pb.RateLimitResponse_OVER_LIMIT
		}
		return &pb.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: o.limit.current}
	}
	st := &pb.RateLimitResponse_DescriptorStatus{
		Code:               pb.RateLimitResponse_OK,
		CurrentLimit:       o.limit.current,
		LimitRemaining:     uint32(max(0, o.res.Remaining)),
		DurationUntilReset: s.untilReset(o),
	}
	if !o.res.Allowed {
		s.stats.overLimitDescriptors.Add(1)
		if !o.shadow {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
	}
	return st
}

// untilReset is duration_until_reset: under the reference's windows, the
// whole seconds to the end of the unit's window on the service's clock (as
// the reference computes it); otherwise the store's time until the limit
// is back to full, rounded up to whole seconds.
func (s *Service) untilReset(o *outcome) *durationpb.Duration {
	if s.opts.reference {
		div := o.limit.seconds
		return &durationpb.Duration{Seconds: div - s.opts.clock.Now().Unix()%div}
	}
	return &durationpb.Duration{Seconds: seconds(o.res.ResetAfter)}
}
