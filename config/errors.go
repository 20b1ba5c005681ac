package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every error Parse and Load return for a file that
// does not compile: errors.Is(err, ErrInvalid) tells a bad file from an I/O
// error.
var ErrInvalid = errors.New("config: invalid rules file")

// Problem is one mistake in a rules file, at a line and column.
type Problem struct {
	File      string
	Line, Col int
	Path      string // where in the document, e.g. rules[2].limit
	Message   string
}

// String returns the problem as file:line:col: path: message.
func (p Problem) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Col, p.Path, p.Message)
}

// Errors lists every problem found in a rules file, in document order. It
// wraps ErrInvalid.
type Errors []Problem

// Error returns one problem per line.
func (e Errors) Error() string {
	var b strings.Builder
	for i, p := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e Errors) Unwrap() error { return ErrInvalid }
