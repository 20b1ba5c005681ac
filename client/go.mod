module github.com/sluicehq/ratelimit/client

go 1.25.0

require (
	github.com/sluicehq/ratelimit v0.1.0
	golang.org/x/time v0.15.0
)

require github.com/dunglas/httpsfv v1.1.2

replace github.com/sluicehq/ratelimit => ..
