package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult is one load test of a real HTTP server on loopback.
type LoadResult struct {
	Name      string
	Conns     int
	Requests  int64 // measured requests (after the warm-up)
	Non200    int64
	Errors    int64
	Elapsed   time.Duration
	P50, P90  time.Duration
	P99, P999 time.Duration
}

// RPS is measured requests per second.
func (r LoadResult) RPS() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// LoadTest serves h on a fresh 127.0.0.1 listener and sends it GET requests
// from conns keep-alive connections (one worker each) for warm + d, or until
// maxReqs measured requests, whichever comes first. Only requests started
// after the warm-up are measured. Traffic never leaves loopback.
func LoadTest(name string, h http.Handler, conns int, warm, d time.Duration, maxReqs int64) (LoadResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return LoadResult{}, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/api/items"
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	res := LoadResult{Name: name, Conns: conns}
	start := time.Now()
	measureFrom := start.Add(warm)
	deadline := measureFrom.Add(d)
	var count, non200, errs atomic.Int64
	lats := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l := make([]time.Duration, 0, 1<<14)
			for {
				t0 := time.Now()
				// Every worker measures at least one request, even if a
				// loaded machine spent the whole run in its warm-up.
				if !t0.Before(deadline) && len(l) > 0 {
					break
				}
				measured := !t0.Before(measureFrom)
				if measured && count.Add(1) > maxReqs {
					break
				}
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if !measured {
					continue
				}
				switch {
				case err != nil:
					errs.Add(1)
				case resp.StatusCode != http.StatusOK:
					non200.Add(1)
				}
				l = append(l, time.Since(t0))
			}
			lats[w] = l
		}(w)
	}
	wg.Wait()
	end := time.Now()
	res.Elapsed = end.Sub(measureFrom)
	if end.After(deadline) {
		res.Elapsed = deadline.Sub(measureFrom)
	}
	all := slices.Concat(lats...)
	res.Requests, res.Non200, res.Errors = int64(len(all)), non200.Load(), errs.Load()
	if len(all) == 0 {
		return res, errors.New("no request completed")
	}
	res.P50, res.P90 = Percentile(all, 0.50), Percentile(all, 0.90)
	res.P99, res.P999 = Percentile(all, 0.99), Percentile(all, 0.999)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return res, fmt.Errorf("shutdown: %w", err)
	}
	return res, nil
}
