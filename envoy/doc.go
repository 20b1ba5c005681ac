// Package envoy serves Envoy's global rate limit protocol.
package envoy
