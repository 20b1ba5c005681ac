package main

import (
	"testing"

	"github.com/sluicehq/ratelimit/examples/internal/apptest"
)

func TestExample(t *testing.T) { apptest.Check(t, newHandler()) }
