package fair

import (
	"net/http"

	"github.com/sluicehq/ratelimit"
)

// The level names of Preset.
const (
	LevelExempt      = "exempt"      // health checks, the control plane: never queued nor refused
	LevelCritical    = "critical"    // the requests the business runs on (payments, logins)
	LevelInteractive = "interactive" // what a user waits for
	LevelBatch       = "batch"       // reports, exports, background sync
	LevelTest        = "test"        // test-mode and synthetic traffic
)

// Preset returns a configuration in the style of Stripe's load
// shedders, for seats concurrent requests whose flows are keyed by flow
// (a tenant or user KeyFunc; nil for one flow per level):
//
//   - exempt: never queued nor refused;
//   - critical: 20 shares, all of them reserved (Reserve 100): a fifth of
//     the seats that no other level can borrow, and first call on every
//     seat the others leave idle;
//   - interactive: 50 shares, lent when idle;
//   - batch: 30 shares, lent when idle;
//   - test: no shares: it runs on idle seats only, so it is shed first,
//     then batch's borrowing, then interactive's.
//
// Every request is interactive until Classify says otherwise. Adopting it:
//
//	cfg := fair.Preset(256, ratelimit.ByUser(userID))
//	cfg.Classify = func(r *http.Request) string {
//		return classes[r.URL.Path] // "" (unknown) falls back to test
//	}
//	handler = fair.New(cfg).Handler(mux)
//
// The reserve makes the preset not fully work conserving: with no critical
// traffic at all, the other levels use at most four fifths of the seats.
// Set Levels[1].Reserve lower to trade that guarantee for throughput.
func Preset(seats int, flow ratelimit.KeyFunc) Config {
	return Config{
		Seats: seats,
		Levels: []Level{
			{Name: LevelExempt, Exempt: true},
			{Name: LevelCritical, Shares: 20, Reserve: 100, Flow: flow},
			{Name: LevelInteractive, Shares: 50, Flow: flow},
			{Name: LevelBatch, Shares: 30, Flow: flow},
			{Name: LevelTest, Shares: 0, Flow: flow},
		},
		Classify: func(*http.Request) string { return LevelInteractive },
	}
}
