module github.com/sluicehq/ratelimit/adapters/chi

go 1.25.0

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/sluicehq/ratelimit v0.1.0
)

replace github.com/sluicehq/ratelimit => ../..
