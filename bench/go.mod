module github.com/sluicehq/ratelimit/bench

go 1.25.0

require github.com/sluicehq/ratelimit v0.0.0

replace github.com/sluicehq/ratelimit => ..
