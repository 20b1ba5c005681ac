package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRunWithinBurst runs the example against the local API with as many
// requests as its burst allows: none is throttled or fails.
func TestRunWithinBurst(t *testing.T) {
	api := httptest.NewServer(localAPI(20))
	defer api.Close()
	var out strings.Builder
	if err := run(&out, api.URL, 10, 4); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "10 OK, 0 throttled (429), 0 failed") {
		t.Fatalf("output %q", out.String())
	}
}
