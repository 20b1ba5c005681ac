module github.com/sluicehq/ratelimit/stores/redis

go 1.25.0

require (
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sluicehq/ratelimit v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/sluicehq/ratelimit => ../..
