package ratelimit_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDependencies checks that a user of the core module inherits no
// framework, Redis or metrics dependency: the core's whole build list (what
// `go list -m all` reports for a module requiring it) holds only the
// modules the project allows (standard library, x/time, golang-lru).
func TestCoreDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	// go test puts its own toolchain's bin first in PATH.
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/sluicehq/ratelimit":      true,
		"golang.org/x/time":                  true,
		"github.com/hashicorp/golang-lru/v2": true,
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod := strings.Fields(line)[0]
		if !allowed[mod] {
			t.Errorf("the core module's build list contains %s", line)
		}
	}
}
