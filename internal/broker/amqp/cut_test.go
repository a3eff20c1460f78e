package amqp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestPeriodicCheckpoint: a node alone on a log whose start RabbitMQ dropped counts on from the
// checkpoints the previous nodes appended every CheckpointEvery entries.
func TestPeriodicCheckpoint(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	ns := brokertest.Namespace()
	start := func() (*amqp.Broker, *brokertest.Node) {
		t.Helper()
		b, err := amqp.New(context.Background(), srv.URL, amqp.Config{
			Name: ns, MaxBytes: 16 << 10, SegmentBytes: 4 << 10, CheckpointEvery: 20,
			CheckpointWait: time.Second, Logger: brokertest.Logger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Run(context.Background(), brokertest.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b, &brokertest.Node{Broker: b, Rec: brokertest.NewRecorder()}
	}
	a, na := start()
	var last *hub.Publication
	for i := range 300 {
		last = na.Publish(t, "chat/periodic", fmt.Sprintf(`{"i":%d,"pad":"%0100d"}`, i, 0))
	}
	// A checkpoint is appended up to half a second after its turn (nodes wait a little so that
	// one appends, not all); a node that keeps running gets it out.
	time.Sleep(700 * time.Millisecond)
	_ = a.Close()
	_, nb := start()
	p := nb.Publish(t, "chat/periodic", `{"from":"b"}`)
	if p.Epoch != last.Epoch || p.Offset != last.Offset+1 {
		t.Fatalf("alone after a periodic checkpoint: published %d/%s after %d/%s", p.Offset, p.Epoch, last.Offset, last.Epoch)
	}
}

// TestStartOnCutLog starts nodes on a log whose start RabbitMQ has dropped (tiny segments and
// size limit). A node joining running nodes counts from the checkpoint they answer with; a
// node starting alone counts from a checkpoint still in the log; and when none is left, it
// appends a reset and every topic starts a new epoch, so no client is told a wrong offset.
func TestStartOnCutLog(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	ns := brokertest.Namespace()
	type node struct {
		*brokertest.Node
		reg *prometheus.Registry
	}
	start := func(checkpointEvery int) *node {
		t.Helper()
		reg := prometheus.NewRegistry()
		b, err := amqp.New(context.Background(), srv.URL, amqp.Config{
			Name: ns, MaxBytes: 16 << 10, SegmentBytes: 4 << 10, CheckpointEvery: checkpointEvery,
			CheckpointWait: time.Second, Registerer: reg, Logger: brokertest.Logger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := brokertest.NewRecorder()
		if err := b.Run(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return &node{Node: &brokertest.Node{Broker: b, Rec: rec}, reg: reg}
	}
	counter := func(n *node, name string) float64 {
		mfs, _ := n.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	publishMany := func(n *node, topic string, count int) *hub.Publication {
		var p *hub.Publication
		for i := range count {
			p = n.Publish(t, topic, fmt.Sprintf(`{"i":%d,"pad":"%0100d"}`, i, 0))
		}
		return p
	}
	firstOffset := func() int64 {
		conn, err := amqp091.Dial(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_ = ch.Qos(10, 0, false)
		ds, err := ch.Consume(ns+".log", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-ds:
			off, _ := d.Headers["x-stream-offset"].(int64)
			return off
		case <-time.After(10 * time.Second):
			t.Fatal("no entry in the log")
			return 0
		}
	}

	a := start(1 << 30) // no periodic checkpoints: B must ask
	last := publishMany(a, "chat/cut", 300)
	if first := firstOffset(); first == 0 {
		t.Fatal("RabbitMQ kept the log's start: the test needs it cut")
	}

	// B joins A: A answers B's request, and both count alike.
	b := start(1 << 30)
	if counter(a, "rtlab_broker_log_checkpoints_total") < 1 {
		t.Fatal("A appended no checkpoint for B")
	}
	pb := b.Publish(t, "chat/cut", `{"from":"b"}`)
	pa := a.Publish(t, "chat/cut", `{"from":"a"}`)
	if pb.Epoch != last.Epoch || pb.Offset != last.Offset+1 || pa.Epoch != last.Epoch || pa.Offset != last.Offset+2 {
		t.Fatalf("after %d/%s: B published %d/%s, A %d/%s", last.Offset, last.Epoch, pb.Offset, pb.Epoch, pa.Offset, pa.Epoch)
	}
	b.Rec.WaitCount(t, "chat/cut", 2, 10*time.Second)
	if got := b.Rec.Get("chat/cut"); got[0].Offset != pb.Offset || got[1].Offset != pa.Offset {
		t.Fatalf("B received offsets %d, %d", got[0].Offset, got[1].Offset)
	}
	hr := b.History(t, "chat/cut", 0, 0)
	if hr.Top != (hub.Position{Offset: pa.Offset, Epoch: pa.Epoch}) {
		t.Fatalf("B's history top %+v, want %d/%s", hr.Top, pa.Offset, pa.Epoch)
	}
	_ = a.Close()
	_ = b.Close()

	// C starts alone: A's checkpoint is still in the log.
	c := start(1 << 30)
	pc := c.Publish(t, "chat/cut", `{"from":"c"}`)
	if pc.Epoch != pa.Epoch || pc.Offset != pa.Offset+1 {
		t.Fatalf("C (from the retained checkpoint) published %d/%s after %d/%s", pc.Offset, pc.Epoch, pa.Offset, pa.Epoch)
	}
	// C pushes that checkpoint out of the log, then stops.
	publishMany(c, "chat/other", 300)
	_ = c.Close()

	// D starts alone with no checkpoint left: no node answers, D resets, new epochs.
	d := start(1 << 30)
	if counter(d, "rtlab_broker_log_resets_total") != 1 {
		t.Fatalf("D read %v resets, want 1", counter(d, "rtlab_broker_log_resets_total"))
	}
	pd := d.Publish(t, "chat/cut", `{"from":"d"}`)
	if pd.Offset != 1 || pd.Epoch == pc.Epoch {
		t.Fatalf("D after a reset published %d/%s, want 1 in a new epoch (old %s)", pd.Offset, pd.Epoch, pc.Epoch)
	}
	if hr := d.History(t, "chat/other", 0, 0); hr.Top.Offset != 0 {
		t.Fatalf("after a reset, chat/other's history is %+v, want none", hr.Top)
	}
}
