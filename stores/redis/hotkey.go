package redisstore

import (
	"fmt"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// HotKeyMode says what a Store does with a key it finds hot.
type HotKeyMode uint8

const (
	// HotLease promotes a hot key to lease mode (see WithLease): its units
	// are taken from Redis a few at a time and spent locally.
	HotLease HotKeyMode = iota + 1
	// HotSplit splits a hot key over several Redis keys placed on distinct
	// Cluster slots, each holding a share of the limit (see HotKeys).
	HotSplit
)

func (m HotKeyMode) String() string {
	switch m {
	case HotLease:
		return "lease"
	case HotSplit:
		return "split"
	}
	return fmt.Sprintf("HotKeyMode(%d)", uint8(m))
}

// Defaults of HotKeys.
const (
	DefaultHotThreshold = 5000
	DefaultHotWindow    = time.Second
	DefaultHotShards    = 3
	// DefaultHotKeys is the most keys one Store holds promoted at once.
	DefaultHotKeys = 256
	// MinShardUnits is the fewest units of capacity and rate each part of
	// a split key keeps: a key splits over at most min(Rate, Capacity)/10
	// parts, and a key too small for 2 is not split.
	MinShardUnits = 10
)

// HotKeys configures hot-key handling (WithHotKeys). The zero value of each
// field takes its default. A Store counts the checks of each key in a
// fixed-size sketch (64 KiB) over windows of Window; a key of which this
// Store made at least Threshold checks within one window is hot, and is
// promoted: to lease mode (HotLease) or split (HotSplit). A promoted key
// whose checks fall below Threshold/2 in a window is demoted.
//
// Only GCRA requests of cost >= 1 without an explicit Window are promoted;
// other algorithms keep their exact single-key path. The detector only
// overestimates: every key with Threshold checks in a window is promoted
// (while fewer than MaxKeys are), and a key with fewer is promoted only
// when other keys' checks share its counters in all four rows of the
// sketch (measured: see docs/redis.md, "Hot keys").
type HotKeys struct {
	// Mode is HotLease (the default) or HotSplit.
	Mode HotKeyMode
	// Threshold is the number of checks of one key per Window on this
	// Store that makes it hot (DefaultHotThreshold).
	Threshold int
	// Window is the detection window (DefaultHotWindow).
	Window time.Duration
	// Shards is the number of parts of a split key (DefaultHotShards),
	// lowered so that each part keeps MinShardUnits units. Use the number
	// of Cluster primaries. Every Store sharing a prefix must use the same
	// Shards, Mode and Threshold: see docs/redis.md.
	Shards int
	// LeaseFraction and LeaseLifetime are the lease size and lifetime of
	// keys promoted by HotLease (defaults 0.01 and 100ms); see WithLease.
	LeaseFraction float64
	LeaseLifetime time.Duration
	// MaxKeys bounds the keys promoted at once (DefaultHotKeys).
	MaxKeys int
	// OnChange, if set, is called after a key is promoted or demoted,
	// synchronously on the path of the check that caused it: keep it fast.
	OnChange func(HotKeyEvent)
}

// HotKeyEvent reports a promotion or demotion.
type HotKeyEvent struct {
	Rule, Key string
	Hot       bool       // promoted (true) or demoted
	Mode      HotKeyMode // HotLease or HotSplit
	Shards    int        // the parts of a split key; 0 for a lease
	Checks    int        // the key's checks in the window that decided
	Adopted   bool       // split by another Store first: this one followed its marker
}

// WithHotKeys turns hot-key handling on (it is off by default). See
// HotKeys. It panics on negative values, a LeaseFraction above 1, or an
// unknown Mode.
func WithHotKeys(h HotKeys) Option {
	if h.Threshold < 0 || h.Window < 0 || h.Shards < 0 || h.MaxKeys < 0 || h.LeaseLifetime < 0 ||
		!(h.LeaseFraction >= 0 && h.LeaseFraction <= 1) || h.Mode > HotSplit {
		panic(fmt.Sprintf("redisstore: WithHotKeys(%+v): invalid value", h))
	}
	if h.Mode == 0 {
		h.Mode = HotLease
	}
	if h.Threshold == 0 {
		h.Threshold = DefaultHotThreshold
	}
	if h.Window == 0 {
		h.Window = DefaultHotWindow
	}
	if h.Shards == 0 {
		h.Shards = DefaultHotShards
	}
	if h.MaxKeys == 0 {
		h.MaxKeys = DefaultHotKeys
	}
	if h.LeaseFraction == 0 {
		h.LeaseFraction = 0.01
	}
	if h.LeaseLifetime == 0 {
		h.LeaseLifetime = 100 * time.Millisecond
	}
	return func(c *config) { c.hot = &h }
}

// hotEligible reports whether req may be promoted.
func hotEligible(req *stores.Request) bool {
	return req.Algorithm == stores.GCRA && req.Cost > 0 && req.Window == (stores.Window{})
}

// splitShards returns the parts a key of limit l splits into: at most
// shards, each keeping MinShardUnits of rate and capacity; below 2, the key
// is not split.
func splitShards(l stores.Limit, shards int) int {
	n := min(shards, min(l.Rate, l.Capacity())/MinShardUnits, maxSplitShards)
	if n < 2 {
		return 0
	}
	return n
}

// splitLimits returns the limits of the n parts of l: rate and capacity
// divided exactly, the remainders going one unit each to the first parts,
// so that the parts' rates and capacities add up to l's.
func splitLimits(l stores.Limit, n int) []stores.Limit {
	out := make([]stores.Limit, n)
	c := l.Capacity()
	for i := range out {
		r := l.Rate / n
		if i < l.Rate%n {
			r++
		}
		b := c / n
		if i < c%n {
			b++
		}
		out[i] = stores.Limit{Rate: r, Period: l.Period, Burst: b}
	}
	return out
}
