module github.com/sluicehq/ratelimit/adapters/echov5

go 1.25.0

require (
	github.com/labstack/echo/v5 v5.4.4
	github.com/sluicehq/ratelimit v0.1.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace github.com/sluicehq/ratelimit => ../..
