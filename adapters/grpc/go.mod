module github.com/sluicehq/ratelimit/adapters/grpc

go 1.25.0

require (
	github.com/sluicehq/ratelimit v0.1.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260706201446-f0a921348800
	google.golang.org/grpc v1.84.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace github.com/sluicehq/ratelimit => ../..
