package redisstore

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slot migration. While a Cluster slot is MIGRATING/IMPORTING, a script
// that names a state key and a call key (or a batch naming several state
// keys) gets TRYAGAIN from a node that holds only some of its keys, and
// go-redis, out of redirects, returns TRYAGAIN or the last ASK or MOVED.
// Such a reply means the script did not run on that attempt. evalRetry
// sends the same call again, with the same keys and arguments and so the
// same call key, after a short backoff, until the slot is handed over or
// the caller's budget is spent: an earlier attempt that did run (one that
// go-redis resent after a dropped connection) is answered from its call
// key, never applied twice.

// Backoff between resends of a call on a migrating slot.
const (
	migrationBackoffMin = 5 * time.Millisecond
	migrationBackoffMax = 100 * time.Millisecond
)

// maxMigrationWait bounds the resends of a call whose ctx has no deadline;
// it is shorter than maxCallKeep, so the call key outlives them.
const maxMigrationWait = 2 * time.Second

// migrating reports whether err is a reply that a Cluster node gives
// instead of running a command on a slot being moved.
func migrating(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.HasPrefix(s, "TRYAGAIN") || strings.HasPrefix(s, "ASK ") || strings.HasPrefix(s, "MOVED ")
}

// evalRetry runs the script like eval and resends it while the reply says
// its slot is being moved, within ctx and maxMigrationWait.
func (s *Store) evalRetry(ctx context.Context, keys []string, args []any) *redis.Cmd {
	cmd := s.eval(ctx, keys, args)
	if !migrating(cmd.Err()) || s.route == oneNode {
		return cmd
	}
	limit := time.Now().Add(maxMigrationWait)
	if d, ok := ctx.Deadline(); ok && d.Before(limit) {
		limit = d
	}
	wait := migrationBackoffMin
	for migrating(cmd.Err()) {
		if time.Until(limit) <= wait {
			return cmd
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return cmd
		case <-t.C:
		}
		wait = min(2*wait, migrationBackoffMax)
		cmd = s.eval(ctx, keys, args)
	}
	return cmd
}
