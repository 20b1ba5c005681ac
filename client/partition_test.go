package ratelimitclient

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

type okBase struct{}

func (okBase) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}, nil
}

func TestPartitionsAreBounded(t *testing.T) {
	tr := &Transport{Base: okBase{}}
	for i := range 3 * maxPartitions {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://host%d.test/", i), nil)
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for i := range tr.parts.shards {
		n += len(tr.parts.shards[i].m)
	}
	if n > maxPartitions {
		t.Fatalf("%d partitions kept, want at most %d", n, maxPartitions)
	}
}

func TestCredentialsSplitPartitions(t *testing.T) {
	tr := &Transport{}
	tr.init()
	a, _ := http.NewRequest(http.MethodGet, "https://api.test/x", nil)
	b, _ := http.NewRequest(http.MethodGet, "https://api.test/y", nil)
	if tr.key(a) != tr.key(b) {
		t.Fatal("paths split partitions")
	}
	b.Header.Set("Authorization", "Bearer two")
	if tr.key(a) == tr.key(b) {
		t.Fatal("credentials did not split partitions")
	}
	a.Header.Set("X-Api-Key", "two")
	b.Header.Del("Authorization")
	b.Header.Set("X-Api-Key", "two")
	if tr.key(a) != tr.key(b) {
		t.Fatal("same API key, different partitions")
	}
}
