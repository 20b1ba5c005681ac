module github.com/sluicehq/ratelimit/config

go 1.25.0

require (
	github.com/sluicehq/ratelimit v0.1.0
	go.yaml.in/yaml/v3 v3.0.5
)

replace github.com/sluicehq/ratelimit => ../
