package envoy

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// call is one ShouldRateLimit of a replay: its descriptors (each as key,
// value, key, value...), the request's hits_addend, and what the
// reference answers: the overall code, each descriptor's code and
// limit_remaining, and whether it carries a current_limit.
type call struct {
	descs   [][]string
	hits    uint32
	times   int // the call is made this many times, each expecting the same; 1 when 0
	want    pb.RateLimitResponse_Code
	codes   []pb.RateLimitResponse_Code
	remain  []uint32
	limited []bool // has current_limit; nil: every descriptor has one
}

// example is one of the configuration examples of envoyproxy/ratelimit's
// README, unchanged, with a replay whose answers follow from the
// reference's documented behaviour.
type example struct {
	name, domain, yaml string
	calls              []call
}

var examples = []example{
	{name: "1 two values of one key", domain: "mongo_cps", yaml: `domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`, calls: []call{
		{descs: [][]string{{"database", "users"}}, hits: 499, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{1}},
		{descs: [][]string{{"database", "users"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"database", "users"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"database", "default"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{499}},
		{descs: [][]string{{"database", "other"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}, limited: []bool{false}},
	}},
	{name: "2 nested descriptors, every one charged", domain: "messaging", yaml: `domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`, calls: []call{
		{descs: [][]string{{"message_type", "marketing", "to_number", "2061111111"}, {"to_number", "2061111111"}}, times: 4,
			want: ok, codes: []pb.RateLimitResponse_Code{ok, ok}},
		{descs: [][]string{{"message_type", "marketing", "to_number", "2061111111"}, {"to_number", "2061111111"}},
			want: ok, codes: []pb.RateLimitResponse_Code{ok, ok}, remain: []uint32{0, 95}},
		// The marketing limit is over; the per-number limit is charged all the same.
		{descs: [][]string{{"message_type", "marketing", "to_number", "2061111111"}, {"to_number", "2061111111"}},
			want: over, codes: []pb.RateLimitResponse_Code{over, ok}, remain: []uint32{0, 94}},
		{descs: [][]string{{"message_type", "marketing", "to_number", "2062222222"}, {"to_number", "2062222222"}},
			want: ok, codes: []pb.RateLimitResponse_Code{ok, ok}, remain: []uint32{4, 99}},
		{descs: [][]string{{"to_number", "2061111111"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{93}},
	}},
	{name: "3 key_value before key", domain: "edge_proxy_per_ip", yaml: `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`, calls: []call{
		{descs: [][]string{{"remote_address", "50.0.0.1"}}, times: 9, want: ok, codes: []pb.RateLimitResponse_Code{ok}},
		{descs: [][]string{{"remote_address", "50.0.0.1"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"remote_address", "50.0.0.1"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"remote_address", "50.0.0.5"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"remote_address", "50.0.0.2"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{9}},
	}},
	{name: "4 a deeper request matches no shallower limit", domain: "example4", yaml: `domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`, calls: []call{
		{descs: [][]string{{"key", "value", "subkey", "subvalue"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}, limited: []bool{false}},
		{descs: [][]string{{"key", "value"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{299}},
	}},
	{name: "4 nested limit at the request's depth", domain: "example4", yaml: `domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`, calls: []call{
		{descs: [][]string{{"key", "value", "subkey", "subvalue"}}, hits: 300, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"key", "value", "subkey", "subvalue"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"key", "value"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}, limited: []bool{false}},
	}},
	{name: "5 unlimited", domain: "internal", yaml: `domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`, calls: []call{
		{descs: [][]string{{"ldap", "x"}, {"azure", "y"}}, hits: 100, want: ok, codes: []pb.RateLimitResponse_Code{ok, ok},
			remain: []uint32{1<<32 - 1, 0}, limited: []bool{false, true}},
		{descs: [][]string{{"ldap", "x"}, {"azure", "y"}}, want: over, codes: []pb.RateLimitResponse_Code{ok, over},
			remain: []uint32{1<<32 - 1, 0}, limited: []bool{false, true}},
	}},
	{name: "6 shadow mode", domain: "example6", yaml: `domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`, calls: []call{
		{descs: [][]string{{"service", "auth-service", "user", "user-a"}}, times: 10, want: ok, codes: []pb.RateLimitResponse_Code{ok}},
		{descs: [][]string{{"service", "auth-service", "user", "user-a"}}, times: 3, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"service", "auth-service", "user", "user-b"}}, hits: 20, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"service", "auth-service", "user", "user-b"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
	}},
	{name: "7 replaces", domain: "example7", yaml: `domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`, calls: []call{
		{descs: [][]string{{"key_1", "value_1", "user", "bkthomps"}, {"key_2", "value_2", "user", "bkthomps"}}, times: 10,
			want: ok, codes: []pb.RateLimitResponse_Code{ok, ok}, limited: []bool{false, true}},
		{descs: [][]string{{"key_1", "value_1", "user", "bkthomps"}, {"key_2", "value_2", "user", "bkthomps"}},
			want: over, codes: []pb.RateLimitResponse_Code{ok, over}, remain: []uint32{0, 0}, limited: []bool{false, true}},
		// The replaced limit was never charged: its 5 a second are intact.
		{descs: [][]string{{"key_1", "value_1", "user", "bkthomps"}}, hits: 5, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"key_1", "value_1", "user", "bkthomps"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
	}},
	{name: "8 detailed_metric", domain: "example8", yaml: `domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`, calls: []call{
		{descs: [][]string{{"key1", "unspecified_value"}}, hits: 10, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"key1", "unspecified_value"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"key1", "unspecified_value2"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{9}},
		{descs: [][]string{{"key1", "value1"}}, hits: 20, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
	}},
	{name: "9 wildcard", domain: "example9", yaml: `domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
`, calls: []call{
		{descs: [][]string{{"key1", "value_1"}}, hits: 20, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"key1", "value_1"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"key1", "value_2"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{19}},
		{descs: [][]string{{"key1", "other"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}, limited: []bool{false}},
	}},
	{name: "10 value_to_metric", domain: "example10", yaml: `domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
`, calls: []call{
		{descs: [][]string{{"route", "api", "http_method", "GET", "subject_id", "123"}}, hits: 60, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"route", "api", "http_method", "GET", "subject_id", "123"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"route", "web", "http_method", "POST", "subject_id", "456"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{59}},
	}},
	{name: "11 share_threshold", domain: "example11", yaml: `domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`, calls: []call{
		{descs: [][]string{{"files", "files/a.pdf"}}, hits: 5, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{5}},
		{descs: [][]string{{"files", "files/b.csv"}}, hits: 5, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"files", "files/c.txt"}}, want: over, codes: []pb.RateLimitResponse_Code{over}, remain: []uint32{0}},
		{descs: [][]string{{"files_no_share", "files_no_share/a.pdf"}}, hits: 10, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{0}},
		{descs: [][]string{{"files_no_share", "files_no_share/b.csv"}}, want: ok, codes: []pb.RateLimitResponse_Code{ok}, remain: []uint32{9}},
	}},
}
