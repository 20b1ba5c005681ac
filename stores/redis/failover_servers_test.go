package redisstore

// Launchers for the failover tests: a primary with a replica watched by
// three Sentinels (redis-server --sentinel, so only the redis-server binary
// is needed), and a Cluster of three primaries each with a replica.

import (
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

const sentinelMaster = "failover-primary"

// sentinelSet is a primary, its replica and three Sentinels.
type sentinelSet struct{ *redistest.SentinelSet }

// masterAddr asks the Sentinels for the current primary's address: the
// answer of a majority, or "" while they disagree.
func (s *sentinelSet) masterAddr() string { return s.MasterAddr() }

// waitFor polls cond every 20ms until it holds or budget passes, then
// fails the test with what.
func waitFor(t testing.TB, budget time.Duration, what string, cond func() bool) {
	t.Helper()
	redistest.WaitFor(t, budget, what, cond)
}

// infoField returns field of INFO section on addr, or "".
func infoField(addr, section, field string) string { return redistest.Info(addr, section, field) }

// startSentinelSet starts a primary, one replica of it, and three Sentinels
// that fail the primary over 500ms after it stops answering, and waits
// until the Sentinels know the replica and each other.
func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	return &sentinelSet{redistest.NewSentinelSet(t, sentinelMaster)}
}

// replicaCluster is a Cluster of three primaries, each with one replica.
type replicaCluster struct{ *redistest.Cluster }

// startReplicaCluster starts six cluster-enabled servers (given a 1s node
// timeout, which the launcher's default 5s placed after it overrides, as
// before the launcher was shared), joins them with redis-cli --cluster
// create --cluster-replicas 1, and waits until every node reports
// cluster_state:ok and every replica's link is up.
func startReplicaCluster(t *testing.T) *replicaCluster {
	t.Helper()
	return &replicaCluster{redistest.NewCluster(t, redistest.ClusterConfig{
		Replicas: 1, Args: []string{"--cluster-node-timeout", "1000"}})}
}

// node returns the node listening on addr.
func (c *replicaCluster) node(addr string) *redisServer { return c.Node(addr) }
