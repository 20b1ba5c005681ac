package envoy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidConfig is wrapped by every error LoadFile, LoadPath and Parse
// return for a file that does not compile: errors.Is(err, ErrInvalidConfig)
// tells a bad file from an I/O error.
var ErrInvalidConfig = errors.New("ratelimit: invalid envoy rate limit configuration")

// Problem is one mistake in a configuration file, at a line and column.
type Problem struct {
	File      string
	Line, Col int
	Path      string // where in the document, e.g. descriptors[1].rate_limit.unit
	Message   string
}

// String returns the problem as file:line:col: path: message.
func (p Problem) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Col, p.Path, p.Message)
}

// ConfigErrors lists every problem found in the configuration, in document
// order. It wraps ErrInvalidConfig.
type ConfigErrors []Problem

// Error returns one problem per line.
func (e ConfigErrors) Error() string {
	var b strings.Builder
	for i, p := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidConfig) hold.
func (e ConfigErrors) Unwrap() error { return ErrInvalidConfig }
