package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores"
)

// routing says which keys one script call may touch together.
type routing uint8

const (
	// oneNode: every key lives on one server (a *redis.Client, standalone
	// or Sentinel failover).
	oneNode routing = iota
	// bySlot: Redis Cluster, where a script's keys must share a slot.
	bySlot
	// byTag: a Ring, or an unknown client: keys sharing a hash tag are on
	// one shard.
	byTag
)

func routingFor(c redis.UniversalClient) routing {
	switch c.(type) {
	case *redis.Client:
		return oneNode
	case *redis.ClusterClient:
		return bySlot
	}
	return byTag
}

// groups splits the indices of keys into groups that one script can serve,
// in order of first appearance, or returns nil when a single script serves
// them all. Requests within a group keep their order.
func (r routing) groups(keys []string) [][]int {
	if r == oneNode || len(keys) < 2 {
		return nil
	}
	ids := make([]string, len(keys)) // the group identity of each key
	same := true
	for i, k := range keys {
		if r == bySlot {
			sl := slot(k)
			ids[i] = string([]byte{byte(sl >> 8), byte(sl)})
		} else {
			ids[i] = hashTag(k)
		}
		same = same && ids[i] == ids[0]
	}
	if same {
		return nil
	}
	var groups [][]int
	index := make(map[string]int, len(keys))
	for i, id := range ids {
		g, ok := index[id]
		if !ok {
			g = len(groups)
			index[id] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// compensationTimeout bounds the refunds of a TakeAll across shards. They
// run even when the caller's ctx is done: the units were consumed, and
// leaving them so is an over-count.
const compensationTimeout = time.Second

// takeAllGroups runs a TakeAll whose keys live on several shards: one
// script per group, in parallel, each all-or-nothing and replying with the
// peeks of its state before the call. If any group denies or fails, the
// groups that consumed get their cost back.
func (s *Store) takeAllGroups(ctx context.Context, now instant, groups [][]int, keys []string, reqs []stores.Request, results []stores.Result) error {
	type outcome struct {
		vals     []int64
		err      error
		consumed bool // every request allowed: the group's cost was taken
	}
	outs := make([]outcome, len(groups))
	var wg sync.WaitGroup
	for g, idx := range groups {
		wg.Go(func() {
			gkeys := make([]string, len(idx))
			args := s.header(make([]any, 0, headerLen+fieldsPerRequest*len(idx)), modePeek, now)
			for j, i := range idx {
				gkeys[j] = keys[i]
				args, _ = appendRequest(args, &reqs[i]) // validated by the caller
			}
			o := &outs[g]
			o.vals, o.err = s.run(ctx, gkeys, args, peekWidth*len(idx))
			if o.err == nil {
				o.consumed = true
				for j := range idx {
					o.consumed = o.consumed && o.vals[peekWidth*j] == 1
				}
			}
		})
	}
	wg.Wait()

	var errs []error
	denied := false
	for _, o := range outs {
		if o.err != nil {
			errs = append(errs, o.err)
		} else if !o.consumed {
			denied = true
		}
	}
	if len(errs) == 0 && !denied {
		for g, idx := range groups {
			for j, i := range idx {
				results[i] = takeResult(&reqs[i], outs[g].vals[peekWidth*j:])
			}
		}
		return nil
	}

	// A Concurrency request gives back exactly the slots it took.
	back := make([]stores.Request, len(reqs))
	for g, idx := range groups {
		for j, i := range idx {
			back[i] = reqs[i]
			if outs[g].consumed {
				back[i].Slot = takeResult(&reqs[i], outs[g].vals[peekWidth*j:]).Slot
			}
		}
	}
	s.compensate(ctx, now, groups, keys, back, func(g int) bool { return outs[g].consumed })
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for g, idx := range groups {
		for j, i := range idx {
			v := outs[g].vals[peekWidth*j:]
			if outs[g].consumed {
				// Report the state from before the call, as a cost-0 peek.
				results[i] = peekResult(&reqs[i], true, v[takeWidth:peekWidth])
			} else {
				results[i] = peekResult(&reqs[i], v[0] == 1, v[1:4])
			}
		}
	}
	return nil
}

// compensate returns the cost of every group for which consumed is true,
// in parallel. Failures are dropped: the units then stay consumed until
// they refill, an over-count.
func (s *Store) compensate(ctx context.Context, now instant, groups [][]int, keys []string, reqs []stores.Request, consumed func(int) bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), compensationTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for g, idx := range groups {
		if !consumed(g) {
			continue
		}
		wg.Go(func() {
			gkeys := make([]string, len(idx))
			args := s.header(make([]any, 0, headerLen+fieldsPerRequest*len(idx)), modeReturn, now)
			for j, i := range idx {
				gkeys[j] = keys[i]
				args, _ = appendRequest(args, &reqs[i])
			}
			_ = s.runReturn(ctx, gkeys, args)
		})
	}
	wg.Wait()
}
