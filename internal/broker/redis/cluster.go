package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// A Redis Cluster is named redis+cluster://[user:password@]host:port[?addr=host:port&addr=…]
// (rediss+cluster:// for TLS): any one node is enough to find the others; addr gives more seeds
// for when the first is down. No commas, so the URL fits in rtlab bench's comma list.
//
// On a cluster every key and channel of a topic carries the topic as its hash tag ({T}), so
// they share one slot: the scripts run on the topic's master, publish with SPUBLISH on the
// topic's shard channel, and a node SSUBSCRIBEs on a connection to that master. Live traffic
// stays on the topic's shard; no publication crosses the cluster bus.

// IsCluster reports whether url names a Redis Cluster (redis+cluster:// or rediss+cluster://).
func IsCluster(url string) bool {
	return strings.HasPrefix(url, "redis+cluster://") || strings.HasPrefix(url, "rediss+cluster://")
}

// NewClient returns a client for url, a single Redis (redis://, rediss://) or a cluster
// (redis+cluster://, rediss+cluster://), set up as the broker and the state store need it: no
// command resent after a network error (a publish or a compare-and-set is not idempotent), the
// context's deadline honoured. It does not connect.
func NewClient(url string) (goredis.UniversalClient, error) {
	if IsCluster(url) {
		opt, err := clusterOptions(url)
		if err != nil {
			return nil, err
		}
		return goredis.NewClusterClient(opt), nil
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.MaxRetries = -1
	opt.DialTimeout = 2 * time.Second
	opt.ContextTimeoutEnabled = true
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return goredis.NewClient(opt), nil
}

func clusterOptions(url string) (*goredis.ClusterOptions, error) {
	scheme, rest, _ := strings.Cut(url, "+cluster://")
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	if strings.Contains(rest[:hostEnd], ",") {
		return nil, errors.New("a cluster URL names one node; give more as ?addr=host:port&addr=host:port")
	}
	if path, _, _ := strings.Cut(rest[hostEnd:], "?"); path != "" && path != "/" && path != "/0" {
		return nil, fmt.Errorf("path %q: a cluster has database 0 only", path)
	}
	opt, err := goredis.ParseClusterURL(scheme + "://" + rest)
	if err != nil {
		return nil, err
	}
	opt.MaxRetries = -1
	// Nor does the cluster client send a command twice: with redirects on it resends after a
	// connection lost mid-command (to the same master, then another), which could run a
	// publish or a compare-and-set twice. A MOVED or ASK reply reloads the slot map and fails
	// the command as unavailable (unavailableReply); the caller's retry finds the new master.
	opt.MaxRedirects = -1
	opt.DialTimeout = 2 * time.Second
	opt.ContextTimeoutEnabled = true
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt, nil
}

// addrOf names where client connects, for logs and errors.
func addrOf(client goredis.UniversalClient) string {
	switch c := client.(type) {
	case *goredis.Client:
		return c.Options().Addr
	case *goredis.ClusterClient:
		return "cluster " + strings.Join(c.Options().Addrs, ",")
	}
	return "?"
}

// slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag, or of the whole
// key when it has none, modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}

// subs is one session's pub/sub connections: one to a single Redis, or one to each master of a
// cluster with the slot ranges it serves.
type subs struct {
	conns   []*goredis.PubSub
	clients []*goredis.Client // the cluster's per-master clients, closed with the session
	ranges  []slotRange       // cluster only, sorted by start
	sharded bool
}

type slotRange struct{ start, end, conn int }

// of is the connection that carries ch.
func (s *subs) of(ch string) *goredis.PubSub {
	if !s.sharded {
		return s.conns[0]
	}
	sl := slot(ch)
	i := sort.Search(len(s.ranges), func(i int) bool { return s.ranges[i].end >= sl })
	if i < len(s.ranges) && s.ranges[i].start <= sl {
		return s.conns[s.ranges[i].conn]
	}
	return s.conns[0] // an uncovered slot: SSUBSCRIBE fails there, and the session restarts
}

func (s *subs) subscribe(ctx context.Context, chans ...string) error {
	if !s.sharded {
		return s.conns[0].Subscribe(ctx, chans...)
	}
	byConn := map[*goredis.PubSub][]string{}
	for _, ch := range chans {
		byConn[s.of(ch)] = append(byConn[s.of(ch)], ch)
	}
	for ps, chs := range byConn {
		// One SSUBSCRIBE per channel: a command's channels must share a slot.
		for _, ch := range chs {
			if err := ps.SSubscribe(ctx, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *subs) unsubscribe(ctx context.Context, ch string) error {
	if !s.sharded {
		return s.conns[0].Unsubscribe(ctx, ch)
	}
	return s.of(ch).SUnsubscribe(ctx, ch)
}

func (s *subs) close() {
	for _, ps := range s.conns {
		_ = ps.Close()
	}
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// dialSubs opens a session's pub/sub connections: for a cluster, one per master in the slot map
// it reads now, so a session after a failover or a resharding follows the new map.
func (b *Broker) dialSubs(ctx context.Context) (*subs, error) {
	cc, ok := b.client.(*goredis.ClusterClient)
	if !ok {
		return &subs{conns: []*goredis.PubSub{b.client.(*goredis.Client).Subscribe(ctx)}}, nil
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the slot map: %w", err)
	}
	s := &subs{sharded: true}
	index := map[string]int{}
	copt := cc.Options()
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		addr := r.Nodes[0].Addr
		i, ok := index[addr]
		if !ok {
			c := goredis.NewClient(&goredis.Options{
				Addr: addr, Username: copt.Username, Password: copt.Password, TLSConfig: copt.TLSConfig,
				Protocol: copt.Protocol, MaxRetries: -1, DialTimeout: copt.DialTimeout,
				ContextTimeoutEnabled: true, DisableIdentity: true,
				MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			})
			i = len(s.conns)
			index[addr] = i
			s.clients = append(s.clients, c)
			s.conns = append(s.conns, c.SSubscribe(ctx))
		}
		s.ranges = append(s.ranges, slotRange{start: int(r.Start), end: int(r.End), conn: i})
	}
	if len(s.conns) == 0 {
		return nil, errors.New("the cluster serves no slot")
	}
	sort.Slice(s.ranges, func(i, j int) bool { return s.ranges[i].start < s.ranges[j].start })
	return s, nil
}
