package ratelimitclient_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/sluicehq/ratelimit"
	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// A client of an API limited to 2 requests a minute. The server's RateLimit
// fields tell the Transport that the third request would have to wait; with
// MaxWait negative it fails at once, without reaching the server.
func Example() {
	limited := ratelimit.New(ratelimit.PerMinute(2), ratelimit.Global())
	api := httptest.NewServer(limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer api.Close()

	client := &http.Client{Transport: &ratelimitclient.Transport{MaxWait: -1}}
	for range 3 {
		resp, err := client.Get(api.URL)
		if err != nil {
			fmt.Println("not sent, would wait:", errors.Is(err, ratelimitclient.ErrWouldWait))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// 200 OK
	// 200 OK
	// not sent, would wait: true
}
