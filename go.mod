module github.com/sluicehq/ratelimit

go 1.25.0

require golang.org/x/time v0.15.0
