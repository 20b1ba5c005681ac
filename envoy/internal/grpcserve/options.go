// Package grpcserve holds the gRPC server settings of the module's
// processes: the envoy-ratelimit command and the benchmark's grpc-floor,
// which must serve calls exactly as the command does for its CPU per call
// to be the command's gRPC share.
package grpcserve

import "google.golang.org/grpc"

// ServerOptions tune a gRPC server for many small calls:
//
//   - a pool of StreamWorkers goroutines serves the calls, so that a call
//     runs on a goroutine whose stack has already grown to what a call
//     needs, rather than on a new one that grows (and copies) its stack
//     every time; a call that finds every worker busy gets a goroutine of
//     its own, as without a pool;
//   - the flow-control windows are HTTP/2's default 64 KiB, fixed: a
//     dynamic window makes the server send a PING (and read its ack) for
//     nearly every call to estimate a bandwidth that messages of a few
//     hundred bytes never need.
//
// A worker waits on Redis for most of a call, so the pool is sized for the
// calls in flight, not for the CPUs; an idle worker costs its stack.
func ServerOptions() []grpc.ServerOption {
	const window = 1 << 16
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.InitialWindowSize(window),
		grpc.InitialConnWindowSize(window),
	}
}

// StreamWorkers is the number of goroutines that serve calls: more than
// the calls in flight from the gateways of most fleets.
const StreamWorkers = 128
