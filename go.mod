module github.com/sluicehq/ratelimit

go 1.25.0
