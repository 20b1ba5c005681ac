// Command llmproxy is an LLM proxy limiting tokens per minute per API key:
// 1,000 tokens a minute for each key. A request is admitted on an estimate
// (its max_tokens, 100 when absent); once the model has answered, the proxy
// reports the tokens actually used, prompt and completion, with
// ratelimit.Settle, and the key is charged the difference, or given it
// back. A client that disconnects while the model works is charged all the
// same. The model is a fake, in-process and deterministic: it answers with
// the prompt's words in reverse order, at most max_tokens of them, a token
// being a word. It needs no Redis: limits live in memory.
//
//	go run ./examples/llmproxy                  # on localhost:8080
//	go run ./examples/llmproxy -addr :9090      # elsewhere
//
// It runs in the foreground: stop it with Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

const (
	tokensPerMinute  = 1000 // per API key
	defaultMaxTokens = 100  // the estimate of a request without max_tokens
	maxMaxTokens     = 500  // larger max_tokens are refused (400)
)

// apiKeys are the keys the proxy accepts. A real proxy would look them up
// in its database; keys are verified before they are counted, so that a
// client cannot get a fresh budget by sending a new key.
var apiKeys = map[string]bool{"sk-alice": true, "sk-bob": true}

func main() {
	ln, base := appserver.ListenFlag("localhost:8080")
	fmt.Printf(`Serving on %[1]s. API keys: sk-alice, sk-bob; %[2]d tokens a minute each.

A completion: the usage is what the key is charged, RateLimit what is left.
  curl -i -H 'Authorization: Bearer sk-alice' -d '{"prompt":"tell me a story","max_tokens":50}' %[1]s/v1/completions

Each of these is admitted on an estimate of 10 tokens (max_tokens) and charged
100 (a 90-word prompt, 10 words of answer): after ten or eleven, the key's
minute is spent and the rest are 429s.
  p=$(yes word | head -n 90 | tr '\n' ' ')
  for i in $(seq 12); do curl -s -o /dev/null -w '%%{http_code} ' -H 'Authorization: Bearer sk-bob' -d "{\"prompt\":\"$p\",\"max_tokens\":10}" %[1]s/v1/completions; done; echo

Stop the server with Ctrl-C.
`, base, tokensPerMinute)
	log.Fatal(http.Serve(ln, newHandler(fakeModel)))
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
}

// usage is what a completion used, in tokens.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// completion is the model's answer.
type completion struct {
	Text  string `json:"text"`
	Usage usage  `json:"usage"`
}

// model answers a completion request, as the upstream API would.
type model func(completionRequest) completion

// fakeModel answers with the prompt's words in reverse order, at most
// req.MaxTokens of them: the completion's length follows from the prompt.
func fakeModel(req completionRequest) completion {
	words := strings.Fields(req.Prompt)
	answer := slices.Clone(words)
	slices.Reverse(answer)
	answer = answer[:min(len(answer), req.MaxTokens)]
	u := usage{PromptTokens: len(words), CompletionTokens: len(answer)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return completion{Text: strings.Join(answer, " "), Usage: u}
}

// newHandler returns the proxy in front of m: API keys checked, the body
// parsed, tokens limited per key, then the model. opts are added to the
// limiter's options (tests give it a clock and a store).
func newHandler(m model, opts ...ratelimit.Option) http.Handler {
	limit := ratelimit.NewRules([]ratelimit.Rule{{
		Name:    "tokens",
		Limit:   ratelimit.PerMinute(tokensPerMinute),
		Key:     ratelimit.ByBearerToken(),
		Cost:    estimate, // the estimate, settled after the model answers
		Settled: true,
	}}, opts...)

	mux := http.NewServeMux()
	mux.Handle("POST /v1/completions", authenticate(parse(limit(complete(m)))))
	return mux
}

// complete asks m for the completion, reports the tokens it used, then
// answers.
func complete(m model) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := m(requestFrom(r.Context()))
		// The tokens are spent whether or not the client is still there:
		// the settlement does not depend on its connection.
		ratelimit.Settle(r.Context(), w, c.Usage.TotalTokens)
		if r.Context().Err() != nil {
			return // the client has gone: no one to answer
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(c)
	})
}

// authenticate refuses requests without a known API key (401).
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !apiKeys[key] {
			http.Error(w, "unknown API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type requestKey struct{}

// parse reads the JSON body into the request's context, for the estimate
// and the model, and refuses bodies it cannot use (400).
func parse(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req completionRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.MaxTokens == 0 {
			req.MaxTokens = defaultMaxTokens
		}
		if req.MaxTokens < 0 || req.MaxTokens > maxMaxTokens {
			http.Error(w, fmt.Sprintf("max_tokens must be between 1 and %d", maxMaxTokens), http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
	})
}

func requestFrom(ctx context.Context) completionRequest {
	req, _ := ctx.Value(requestKey{}).(completionRequest)
	return req
}

// estimate is a request's cost before the model answers: its max_tokens.
// The prompt is not counted here; what the estimate misses is settled.
func estimate(r *http.Request) int {
	return requestFrom(r.Context()).MaxTokens
}
