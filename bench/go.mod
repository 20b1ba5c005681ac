module github.com/sluicehq/ratelimit/bench

go 1.25.0

require (
	github.com/didip/tollbooth/v7 v7.0.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/httprate v0.16.1
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/platinummonkey/go-concurrency-limits v0.10.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sethvargo/go-limiter v0.7.1
	github.com/sluicehq/ratelimit v0.1.0
	github.com/sluicehq/ratelimit/stores/redis v0.1.0
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-pkgz/expirable-cache/v3 v3.0.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hashicorp/golang-lru v0.5.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
	google.golang.org/grpc v1.84.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/sluicehq/ratelimit => ..

replace github.com/sluicehq/ratelimit/stores/redis => ../stores/redis
