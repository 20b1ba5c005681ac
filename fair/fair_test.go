package fair_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/fair"
)

// oneLevel is a Scheduler of seats seats and one level "l" in one FIFO queue of
// length qlen, whose requests' flows are their X-Flow header.
func oneLevel(seats, qlen int, maxWait time.Duration, obs fair.Observer) *fair.Scheduler {
	return fair.New(fair.Config{
		Seats: seats, MaxWait: maxWait, Observer: obs,
		Levels: []fair.Level{{Name: "l", Shares: 1, Queues: 1, HandSize: 1, QueueLength: qlen, Flow: ratelimit.ByHeader("X-Flow")}},
	})
}

type admission struct {
	rec  *httptest.ResponseRecorder
	done func()
	ok   bool
	at   time.Time // when Admit returned
}

// admitAsync calls Admit in a goroutine; the result arrives on the channel.
func admitAsync(f *fair.Scheduler, r *http.Request) <-chan admission {
	c := make(chan admission, 1)
	go func() {
		rec := httptest.NewRecorder()
		done, ok := f.Admit(rec, r)
		c <- admission{rec, done, ok, time.Now()}
	}()
	return c
}

func TestCanceledWaiterLeavesTheQueueAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := oneLevel(1, 10, time.Minute, nil)
		hold, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if !ok {
			t.Fatal("the first request was refused")
		}
		ctx, cancel := context.WithCancel(context.Background())
		res := admitAsync(f, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
		synctest.Wait()
		if q := f.Stats().Queued; q != 1 {
			t.Fatalf("queued %d, want 1", q)
		}
		time.Sleep(time.Second)
		canceled := time.Now()
		cancel()
		synctest.Wait()
		if q := f.Stats().Queued; q != 0 {
			t.Fatalf("queued %d after the cancel, want 0", q)
		}
		a := <-res
		if left := a.at.Sub(canceled); left > time.Millisecond {
			t.Errorf("the waiter left %v after its context ended, want <= 1ms", left)
		}
		if a.ok || a.rec.Code != 503 {
			t.Errorf("canceled waiter: ok=%v status %d, want refused with 503", a.ok, a.rec.Code)
		}
		hold()
		if s := f.Stats(); s.InUse != 0 || s.Queued != 0 {
			t.Errorf("after the release: %+v, want nothing in use or queued", s)
		}
	})
}

func TestFullQueueRefusesTheFlowWith429AndAProblemBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := oneLevel(1, 2, time.Minute, nil)
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		waiting := make(chan admission, 2)
		for range 2 {
			go func() { waiting <- <-admitAsync(f, httptest.NewRequest("GET", "/", nil)) }()
		}
		synctest.Wait()
		rec := httptest.NewRecorder()
		if _, ok := f.Admit(rec, httptest.NewRequest("GET", "/", nil)); ok || rec.Code != 429 {
			t.Fatalf("third waiter: ok=%v status %d, want 429", ok, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Content-Type %q", ct)
		}
		if ra, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || ra < 1 || ra > 32 {
			t.Errorf("Retry-After %q, want 1-32", rec.Header().Get("Retry-After"))
		}
		var body struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Level  string `json:"level"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status != 429 || body.Level != "l" || body.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" {
			t.Errorf("body %q (%v), want a problem naming level l", rec.Body, err)
		}
		hold()
		for range 2 { // served one after the other
			a := <-waiting
			if !a.ok {
				t.Fatalf("a waiter was refused: %d %s", a.rec.Code, a.rec.Body)
			}
			a.done()
		}
	})
}

func TestWaitEndsWith503AtMaxWaitOrTheContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := oneLevel(1, 10, 100*time.Millisecond, nil)
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		defer hold()
		start := time.Now()
		a := <-admitAsync(f, httptest.NewRequest("GET", "/", nil))
		if a.ok || a.rec.Code != 503 || a.at.Sub(start) != 100*time.Millisecond {
			t.Errorf("MaxWait: ok=%v status %d after %v, want 503 after 100ms", a.ok, a.rec.Code, a.at.Sub(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start = time.Now()
		a = <-admitAsync(f, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
		if a.ok || a.rec.Code != 503 || a.at.Sub(start) != 30*time.Millisecond {
			t.Errorf("deadline: ok=%v status %d after %v, want 503 after 30ms", a.ok, a.rec.Code, a.at.Sub(start))
		}
		if f.Stats().Queued != 0 {
			t.Error("a timed-out waiter stayed queued")
		}
	})
}

// Waiters whose deadline falls at the instant the seat frees race the
// release; whichever wins, no seat is lost nor given twice.
func TestGrantRacingATimeoutLosesNoSeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := oneLevel(2, 50, time.Minute, nil)
		var served, refused atomic.Int64
		var wg sync.WaitGroup
		for round := range 20 {
			holds := []func(){}
			for range 2 {
				d, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
				holds = append(holds, d)
			}
			for i := range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(10+i%2)*time.Millisecond)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cancel()
					done, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/", nil))
					if ok {
						served.Add(1)
						done()
					} else {
						refused.Add(1)
					}
				}()
			}
			time.Sleep(10 * time.Millisecond)
			for _, h := range holds {
				h()
			}
			wg.Wait()
			if s := f.Stats(); s.InUse != 0 || s.Queued != 0 {
				t.Fatalf("round %d: %+v left behind", round, s)
			}
		}
		if served.Load()+refused.Load() != 200 || served.Load() == 0 {
			t.Errorf("served %d, refused %d of 200", served.Load(), refused.Load())
		}
	})
}

func TestExemptLevelNeverQueuesNorTakesASeat(t *testing.T) {
	var events []fair.Event
	f := fair.New(fair.Config{
		Seats:    1,
		Levels:   []fair.Level{{Name: "health", Exempt: true}, {Name: "api", Shares: 1}},
		Classify: func(r *http.Request) string { return map[string]string{"/healthz": "health"}[r.URL.Path] },
		Observer: fair.ObserverFunc(func(e fair.Event) { events = append(events, e) }),
	})
	hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/api", nil))
	defer hold()
	for range 100 {
		done, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
		if !ok {
			t.Fatal("an exempt request was refused")
		}
		done()
	}
	if s := f.Stats(); s.InUse != 1 || s.Queued != 0 {
		t.Errorf("stats %+v, want only the api request's seat", s)
	}
	if events[0].Level != "api" || events[0].Outcome != fair.Admitted {
		t.Errorf("an unknown name went to %q (%v), want the last non-exempt level", events[0].Level, events[0].Outcome)
	}
	if e := events[1]; e.Level != "health" || e.Outcome != fair.Exempt || e.Wait != 0 {
		t.Errorf("exempt event %+v", e)
	}
}

func TestReserveIsNeverLent(t *testing.T) {
	f := fair.New(fair.Config{
		Seats:    4,
		MaxWait:  time.Nanosecond,
		Levels:   []fair.Level{{Name: "critical", Shares: 1, Reserve: 100}, {Name: "other", Shares: 1}},
		Classify: func(r *http.Request) string { return r.URL.Path[1:] },
	})
	admit := func(level string) bool {
		_, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/"+level, nil))
		return ok
	}
	for i := range 2 { // other's own two seats
		if !admit("other") {
			t.Fatalf("other was refused its own seat %d", i+1)
		}
	}
	if admit("other") {
		t.Fatal("other borrowed critical's reserve")
	}
	for i := range 2 { // critical's two reserved seats
		if !admit("critical") {
			t.Fatalf("critical was refused its reserved seat %d", i+1)
		}
	}
}

func TestIdleSeatsAreBorrowed(t *testing.T) {
	f := fair.New(fair.Config{
		Seats:    4,
		MaxWait:  time.Nanosecond,
		Levels:   []fair.Level{{Name: "a", Shares: 3}, {Name: "b", Shares: 1}},
		Classify: func(r *http.Request) string { return r.URL.Path[1:] },
	})
	for i := range 4 {
		if _, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/b", nil)); !ok {
			t.Fatalf("b's request %d was refused with a idle", i)
		}
	}
}

// growingSeats returns a Scheduler of one level whose SeatsFunc reads
// seats, which starts at 1.
func growingSeats() (*fair.Scheduler, *atomic.Int64) {
	seats := new(atomic.Int64)
	seats.Store(1)
	return fair.New(fair.Config{
		SeatsFunc: func() int { return int(seats.Load()) },
		Levels:    []fair.Level{{Name: "l", Shares: 1}},
	}), seats
}

func TestGrowingSeatsFuncAdmitsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, seats := growingSeats()
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		defer hold()
		waiter := admitAsync(f, httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		seats.Store(3)
		next := <-admitAsync(f, httptest.NewRequest("GET", "/", nil))
		a := <-waiter
		if !a.ok || !next.ok {
			t.Fatalf("after growing to 3 seats: waiter ok=%v, next ok=%v", a.ok, next.ok)
		}
		if s := f.Stats(); s.Seats != 3 || s.InUse != 3 {
			t.Errorf("stats %+v", s)
		}
		a.done()
		next.done()
	})
}

func TestObserverSeesLevelFlowQueueAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []fair.Event
		f := oneLevel(1, 10, time.Minute, fair.ObserverFunc(func(e fair.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Flow", "tenant-7")
		w := admitAsync(f, r)
		time.Sleep(40 * time.Millisecond)
		hold()
		(<-w).done()
		e := events[1]
		if e.Outcome != fair.Admitted || e.Level != "l" || e.Flow != "tenant-7" || e.Queue != 0 || e.Wait != 40*time.Millisecond {
			t.Errorf("event %+v", e)
		}
		if events[0].Queue != -1 || events[0].Flow != "" || events[0].Wait != 0 {
			t.Errorf("uncontended event %+v", events[0])
		}
	})
}

func TestNewPanicsOnBadConfig(t *testing.T) {
	l := []fair.Level{{Name: "l", Shares: 1}}
	for name, c := range map[string]fair.Config{
		"no levels":     {Seats: 1},
		"no seats":      {Levels: l},
		"neg wait":      {Seats: 1, Levels: l, MaxWait: -1},
		"dup name":      {Seats: 1, Levels: []fair.Level{{Name: "a"}, {Name: "a"}}},
		"empty name":    {Seats: 1, Levels: []fair.Level{{}}},
		"neg shares":    {Seats: 1, Levels: []fair.Level{{Name: "a", Shares: -1}}},
		"reserve > 100": {Seats: 1, Levels: []fair.Level{{Name: "a", Reserve: 101}}},
		"hand > queues": {Seats: 1, Levels: []fair.Level{{Name: "a", Queues: 4, HandSize: 5}}},
		"neg queue":     {Seats: 1, Levels: []fair.Level{{Name: "a", QueueLength: -1}}},
		"all exempt":    {Seats: 1, Levels: []fair.Level{{Name: "a", Exempt: true}}},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); len(r) < 11 || r[:11] != "ratelimit: " {
					t.Errorf("%s: panic %q, want a ratelimit: message", name, r)
				}
			}()
			fair.New(c)
		}()
	}
}

func TestHandlerServesAndFreesTheSeat(t *testing.T) {
	f := oneLevel(1, 1, time.Nanosecond, nil)
	h := f.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 204 {
			t.Fatalf("status %d, want 204: the seat was not freed", rec.Code)
		}
	}
}

// The preset keeps a fifth of the seats for critical requests, rounded
// down: 2 of 10, none of 1.
func TestPresetReservesAFifthForCritical(t *testing.T) {
	for _, c := range []struct{ seats, others int }{{10, 8}, {1, 1}, {4, 4}} {
		cfg := fair.Preset(c.seats, nil)
		cfg.MaxWait = time.Nanosecond
		cfg.Classify = func(r *http.Request) string { return r.URL.Path[1:] }
		f := fair.New(cfg)
		admitted := 0
		for _, level := range []string{"interactive", "batch", "test"} {
			for range c.seats {
				if _, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/"+level, nil)); ok {
					admitted++
				}
			}
		}
		if admitted != c.others {
			t.Errorf("%d seats: the other levels took %d, want %d", c.seats, admitted, c.others)
		}
		for i := range c.seats - c.others {
			if _, ok := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/critical", nil)); !ok {
				t.Errorf("%d seats: critical request %d refused", c.seats, i)
			}
		}
	}
}

func TestRequestWithAnEndedContextIsNotQueued(t *testing.T) {
	var got []fair.Outcome
	f := oneLevel(1, 10, time.Minute, fair.ObserverFunc(func(e fair.Event) { got = append(got, e.Outcome) }))
	hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	defer hold()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	if _, ok := f.Admit(rec, httptest.NewRequestWithContext(ctx, "GET", "/", nil)); ok || rec.Code != 503 {
		t.Fatalf("ok=%v status %d, want 503", ok, rec.Code)
	}
	if f.Stats().Queued != 0 || got[1] != fair.Canceled {
		t.Errorf("queued %d, outcome %v; want 0 and canceled", f.Stats().Queued, got[1])
	}
}

// TestDeadlineWhileWaitingIsReportedAsTimedOut: a waiter whose context
// deadline comes before a seat is refused with 503 and reported TimedOut
// (no seat before its deadline), as one whose deadline had already passed
// is; Canceled is for a context canceled while it waited.
func TestDeadlineWhileWaitingIsReportedAsTimedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []fair.Outcome
		// The flow key takes a microsecond, as the work between reading
		// the clock and arming the wait's timer takes some on a real
		// clock: the deadline then comes a little before the timer.
		slowKey := func(*http.Request) (string, error) { time.Sleep(time.Microsecond); return "k", nil }
		f := fair.New(fair.Config{
			Seats: 1, MaxWait: time.Minute,
			Observer: fair.ObserverFunc(func(e fair.Event) {
				mu.Lock()
				got = append(got, e.Outcome)
				mu.Unlock()
			}),
			Levels: []fair.Level{{Name: "l", Shares: 1, Queues: 1, HandSize: 1, QueueLength: 100, Flow: slowKey}},
		})
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		defer hold()
		for i := range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(10+i)*time.Millisecond)
			a := <-admitAsync(f, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
			cancel()
			if a.ok || a.rec.Code != 503 {
				t.Fatalf("waiter %d: ok=%v status %d, want 503", i, a.ok, a.rec.Code)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		res := admitAsync(f, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
		synctest.Wait()
		cancel()
		<-res
		mu.Lock()
		defer mu.Unlock()
		for i, o := range got[1:21] {
			if o != fair.TimedOut {
				t.Errorf("waiter %d, past its deadline: outcome %v, want %v", i, o, fair.TimedOut)
			}
		}
		if o := got[21]; o != fair.Canceled {
			t.Errorf("canceled waiter: outcome %v, want %v", o, fair.Canceled)
		}
	})
}

// TestGrowingSeatsFuncAdmitsWaitersAtACompletion: SeatsFunc grows from 1
// to 3 while two requests wait and no new request arrives (every client
// is waiting, as under overload with closed-loop clients); when the
// request in its seat completes, both waiters get seats, as the docs say
// ("admitted at the next admission or completion"), rather than one, the
// other waiting for a new arrival or its MaxWait.
func TestGrowingSeatsFuncAdmitsWaitersAtACompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, seats := growingSeats()
		hold, _ := f.Admit(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		w1 := admitAsync(f, httptest.NewRequest("GET", "/", nil))
		w2 := admitAsync(f, httptest.NewRequest("GET", "/", nil))
		synctest.Wait()
		seats.Store(3)
		hold()
		synctest.Wait()
		if s := f.Stats(); s.Seats != 3 || s.Queued != 0 || s.InUse != 2 {
			t.Errorf("after the completion, with SeatsFunc at 3: %+v; want 3 seats, both waiters in seats", s)
		}
		for _, w := range []<-chan admission{w1, w2} {
			if a := <-w; a.ok {
				a.done()
			}
		}
	})
}
