// Command ratelimitclient calls a rate-limited API through
// ratelimitclient.Transport: the requests are spread to fit the limit the
// server announces in its RateLimit fields, instead of bursting into 429s.
//
// With no -url it starts a local API limited to -limit requests per second
// by this project's middleware, and calls it:
//
//	go run ./examples/ratelimitclient -limit 10 -n 50
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

func main() {
	url := flag.String("url", "", "API to call; empty starts a local one")
	limit := flag.Int("limit", 10, "the local API's limit, requests per second")
	n := flag.Int("n", 50, "requests to make")
	workers := flag.Int("workers", 8, "concurrent callers")
	flag.Parse()

	if *url == "" {
		api := httptest.NewServer(localAPI(*limit))
		defer api.Close()
		*url = api.URL
	}
	if err := run(os.Stdout, *url, *n, *workers); err != nil {
		log.Fatal(err)
	}
}

// localAPI is an API limited to limit requests per second.
func localAPI(limit int) http.Handler {
	limited := ratelimit.New(ratelimit.PerSecond(limit), ratelimit.Global())
	return limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
}

// run makes n GET requests to url from workers goroutines and reports the
// outcome to out.
func run(out io.Writer, url string, n, workers int) error {
	var waits, throttles atomic.Int64
	client := &http.Client{
		Timeout: time.Minute,
		Transport: &ratelimitclient.Transport{Observer: func(e ratelimitclient.Event) {
			switch e.Kind {
			case ratelimitclient.Waited:
				waits.Add(1)
			case ratelimitclient.Throttled:
				throttles.Add(1)
			}
		}},
	}
	var ok, failed atomic.Int64
	var firstErr error
	var once sync.Once
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range jobs {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	fmt.Fprintf(out, "%d requests in %v: %d OK, %d throttled (429), %d failed; %d waited for the rate limit\n",
		n, time.Since(start).Round(10*time.Millisecond), ok.Load(), throttles.Load(), failed.Load(), waits.Load())
	if firstErr != nil {
		return fmt.Errorf("first failure: %w", firstErr)
	}
	return nil
}
