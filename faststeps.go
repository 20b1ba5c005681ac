package ratelimit

import (
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
)

// admitSteps is admit with the steps a rule may add to the direct path:
// the observers get the decision, as on the general path, and a shadow
// rule counts the request without enforcing anything or writing a field;
// a paced rule waits for its turn (admitPaced).
// Kept apart so that the path without steps has no test more.
func (f *fastRule) admitSteps(w http.ResponseWriter, r *http.Request, ru *rule) (ok, handled bool) {
	if f.pace != nil {
		return f.admitPaced(w, r, ru)
	}
	h := w.Header()
	if f.shadow {
		h = nil // it writes no field: a limiter around it changes nothing
	}
	start := f.obs.start()
	res, now, handled := f.take(h, r, ru)
	if !handled {
		return false, false
	}
	f.observe(r, ru, &res, start)
	if f.shadow {
		return true, true
	}
	return f.respond(w, w.Header(), &res, now), true
}

// observe reports the decision res, taken since start, to the observers.
func (f *fastRule) observe(r *http.Request, ru *rule, res *memstore.Result, start time.Time) {
	if len(*f.obs) == 0 {
		return
	}
	deniedAs := OutcomeDenied
	if f.shadow {
		deniedAs = OutcomeShadowDenied
	}
	f.obs.result(r, ru, res.Under(ru.Limit), deniedAs, since(start))
}
