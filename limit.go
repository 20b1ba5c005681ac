package ratelimit

import "time"

// PerSecond returns a Limit of n events per second.
func PerSecond(n int) Limit { return Limit{Rate: n, Period: time.Second} }

// PerMinute returns a Limit of n events per minute.
func PerMinute(n int) Limit { return Limit{Rate: n, Period: time.Minute} }

// PerHour returns a Limit of n events per hour.
func PerHour(n int) Limit { return Limit{Rate: n, Period: time.Hour} }

// PerDay returns a Limit of n events per 24 hours. For calendar days in a time
// zone use a fixed-window quota (see Quota).
func PerDay(n int) Limit { return Limit{Rate: n, Period: 24 * time.Hour} }
