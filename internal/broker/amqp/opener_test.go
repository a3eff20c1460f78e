package amqp

import (
	"context"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
)

// TestOpenerShards: the RabbitMQ shards a node opens through one Opener (--broker with several
// amqp:// URLs) share one count of sequencer roles, and each shard's direct listener takes the
// port after the previous one's; one URL takes no count.
func TestOpenerShards(t *testing.T) {
	srv := brokertest.StartRabbitVhosts(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := Settings{Direct: "127.0.0.1:7400"}.Opener()
	var shards []*Broker
	for i := range 2 {
		o, err := open(ctx, srv.VhostURL(i+1), broker.Options{Shard: i, Shards: 2, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = o.Broker.Close() })
		shards = append(shards, o.Broker.(*Broker))
	}
	if r := shards[0].cfg.Roles; r == nil || r != shards[1].cfg.Roles || r.Shards() != 2 {
		t.Errorf("shards' roles %p and %p: want one count of 2 shards", shards[0].cfg.Roles, shards[1].cfg.Roles)
	}
	if a, b := shards[0].cfg.Direct, shards[1].cfg.Direct; a != "127.0.0.1:7400" || b != "127.0.0.1:7401" {
		t.Errorf("direct addresses %s, %s; want 127.0.0.1:7400, 127.0.0.1:7401", a, b)
	}
	one, err := Settings{Direct: "127.0.0.1:0"}.Opener()(ctx, srv.VhostURL(1), broker.Options{Shards: 1, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Broker.Close()
	if b := one.Broker.(*Broker); b.cfg.Roles != nil || b.cfg.Direct != "127.0.0.1:0" {
		t.Errorf("one URL: roles %p, direct %s; want none, 127.0.0.1:0", b.cfg.Roles, b.cfg.Direct)
	}
	for addr, want := range map[string]string{"127.0.0.1:0": "127.0.0.1:0", "": "", "[::1]:9000": "[::1]:9003"} {
		if got := shardAddr(addr, 3); got != want {
			t.Errorf("shard 3 of %q: %q, want %q", addr, got, want)
		}
	}
}
