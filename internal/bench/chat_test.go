package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// chatCell builds a chat or notify cell without starting anything: the clock starts at 0 and
// every user's phase is set to phase.
func chatCell(t *testing.T, o Options, users int, phase time.Duration) *cell {
	t.Helper()
	o.Users, o.Stages = []int{users}, "10s:PEAK,10s:PEAK"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	plan := NewPlan(Resolve(o.stageSpecs, users))
	c := newCell(context.Background(), &o, results.KindRTLab, "ws", plan, []string{"127.0.0.1:1"})
	c.clk = clock{t0: time.Unix(0, 0), base: 0}
	for _, v := range c.vus {
		v.phase = phase
	}
	return c
}

func newActivity(v *vu, leave int64) *activity {
	a := &activity{v: v, leave: leave}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.cutoff.Store(leave - int64(v.c.opts.Grace))
	return a
}

func TestNextTurn(t *testing.T) {
	c := chatCell(t, Options{Scenario: ScenarioChat, Interval: time.Second}, 1, 300*time.Millisecond)
	v := c.vus[0]
	const ms = int64(time.Millisecond)
	for now, want := range map[int64]int64{
		0:         300 * ms,  // before the first turn
		300 * ms:  1300 * ms, // strictly after now
		301 * ms:  1300 * ms,
		1299 * ms: 1300 * ms,
		4500 * ms: 5300 * ms,
	} {
		if got := c.nextTurn(v, now); got != want {
			t.Errorf("nextTurn(%d ms) = %d ms, want %d ms", now/ms, got/ms, want/ms)
		}
	}
}

// TestChatSession follows one session through the scheduler's eyes: no TALK before ENTER, then
// exactly --talks turns, then the LEAVE, and a delivery window that ends the grace period
// before that LEAVE.
func TestChatSession(t *testing.T) {
	const s = int64(time.Second)
	c := chatCell(t, Options{Scenario: ScenarioChat, Interval: time.Second, Talks: 3, Grace: 1500 * time.Millisecond}, 2, 0)
	v := c.vus[0]
	a := newActivity(v, 20*s)
	if v.room != "chat/"+c.tag+"-r0" || v.topic != v.room || v.name != c.tag+"-u0" || !v.measured || !v.talker {
		t.Fatalf("user %+v", v)
	}
	q := make(chan pubJob, 4)
	turn := func(ts int64) bool { return c.chatTurn(a, ts, q, nil) }
	if turn(1 * s) {
		t.Error("TALK before ENTER")
	}
	a.estab.Store(1)
	c.enteredAt(a, 2*s+s/2) // turns at 3, 4, 5 s; LEAVE due at 6 s
	if a.from.Load() != 2*s+s/2 || a.talkFrom.Load() != 3*s || a.talkUntil.Load() != 6*s {
		t.Fatalf("from %d talk %d..%d", a.from.Load(), a.talkFrom.Load(), a.talkUntil.Load())
	}
	if got := a.cutoff.Load(); got != 6*s-1500*int64(time.Millisecond) {
		t.Errorf("cutoff %d, want LEAVE − grace = 4.5 s", got)
	}
	for ts, want := range map[int64]bool{2 * s: false, 3 * s: true, 4 * s: true, 5 * s: true} {
		if got := turn(ts); got != want {
			t.Errorf("turn at %d s = %v, want %v", ts/s, got, want)
		}
	}
	if len(q) != 0 {
		t.Fatalf("%d jobs before the LEAVE turn", len(q))
	}
	if turn(6 * s) {
		t.Error("TALK at the LEAVE turn")
	}
	if job := <-q; job.kind != jobLeave || job.a != a || !a.leaving.Load() {
		t.Errorf("LEAVE turn handed %+v", job)
	}
	if turn(7*s) || len(q) != 0 || c.scn.turn(c, a, 8*s, q, nil) {
		t.Error("turns after the LEAVE")
	}
	// Entering again (a new connection) keeps the window and the turns.
	c.enteredAt(a, 5*s)
	if a.from.Load() != 2*s+s/2 || a.talkFrom.Load() != 3*s {
		t.Error("a second ENTER moved the session")
	}
	for ts, want := range map[int64]bool{2 * s: false, 2*s + s/2: true, 4 * s: true, 4*s + s/2: false} {
		if got := a.inWindow(ts); got != want {
			t.Errorf("inWindow(%.1f s) = %v, want %v", float64(ts)/float64(s), got, want)
		}
	}
	a.closeWindow()
	if len(v.windows) != 1 || v.windows[0] != (window{2*s + s/2, 4*s + s/2}) {
		t.Errorf("windows %v", v.windows)
	}

	// With --hold the turns never end, and the window ends at the planned leave − grace.
	h := chatCell(t, Options{Scenario: ScenarioChat, Interval: time.Second, Hold: true}, 1, 0)
	ha := newActivity(h.vus[0], 20*s)
	h.enteredAt(ha, s/2)
	if ha.talkUntil.Load() != math.MaxInt64 || ha.cutoff.Load() != 20*s-int64(h.opts.Grace) || !h.chatTurn(ha, 19*s, q, nil) {
		t.Errorf("hold: until %d cutoff %d", ha.talkUntil.Load(), ha.cutoff.Load())
	}
}

// TestNotifyAccounting checks the notify roles and the expected-delivery rule: only owners
// receive what is measured, a TALK is expected at its room's owner when it falls in the
// owner's window, and members' receipts of room traffic stay out of the figures.
func TestNotifyAccounting(t *testing.T) {
	const s = int64(time.Second)
	c := chatCell(t, Options{Scenario: ScenarioNotify, Interval: time.Second, RoomSize: 3, Grace: 2 * time.Second}, 6, 0)
	// Rooms: 0 = users 0, 2, 4; 1 = users 1, 3, 5. Owners are 0 and 1.
	if c.groups != 2 {
		t.Fatalf("%d rooms", c.groups)
	}
	for i, v := range c.vus {
		owner := i < 2
		if v.owner != owner || v.measured != owner || v.talker == owner || (v.pubs == nil) != owner {
			t.Errorf("user %d: owner %v measured %v talker %v", i, v.owner, v.measured, v.talker)
		}
		if owner && v.topic != "notify/"+v.name || !owner && v.topic != v.room {
			t.Errorf("user %d subscribes to %s", i, v.topic)
		}
	}
	select {
	case <-c.ownerIn[0]:
		t.Fatal("room 0's owner counted as entered before its ENTER")
	default:
	}
	own := newActivity(c.vus[0], 10*s) // window [1 s, 8 s)
	own.estab.Store(1)
	c.enteredAt(own, 1*s)
	select {
	case <-c.ownerIn[0]:
	default:
		t.Fatal("members of room 0 still wait after its owner entered")
	}
	if own.talkFrom.Load() != 0 {
		t.Error("an owner got TALK turns")
	}
	mem := newActivity(c.vus[2], 10*s)
	mem.estab.Store(1)
	c.enteredAt(mem, 1*s+s/2)

	pub := func(user int, ts int64, state uint32) *pubRecord {
		v := c.vus[user]
		p := &v.pubs[v.seq]
		v.seq++
		p.ts = ts
		p.state.Store(state)
		return p
	}
	p1 := pub(2, 2*s, pubOK)
	p2 := pub(4, 3*s, pubOK)
	pub(4, 4*s, pubFailed)   // refused: expected nowhere
	p4 := pub(2, 9*s, pubOK) // after the owner's cutoff
	pub(3, 2*s, pubOK)       // room 1, whose owner never entered: expected nowhere

	notify := func(user int, seq int64, ts int64, off uint64) {
		own.v.receive(own, parseData(appendTalk(nil, c.vus[user], int(seq), ts)), 100, ts+int64(time.Millisecond))
	}
	notify(2, 0, 2*s, 1)
	notify(4, 0, 3*s, 2)
	notify(2, 1, 9*s, 3) // outside the window: latency counted, ratio not
	// A member sees the room's TALKs: not measured.
	mem.v.receive(mem, parseData(appendTalk(nil, c.vus[4], 0, 3*s)), 100, 3*s+1)
	own.closeWindow()
	mem.closeWindow()
	if len(c.vus[2].windows) != 0 {
		t.Errorf("a member has delivery windows %v", c.vus[2].windows)
	}
	if p1.recv.Load() != 1 || p2.recv.Load() != 1 || p4.recv.Load() != 0 {
		t.Errorf("receipts %d %d %d, want 1 1 0", p1.recv.Load(), p2.recv.Load(), p4.recv.Load())
	}
	exp, rcv, _ := c.delivery(math.MaxInt64)
	if exp != 2 || rcv != 2 {
		t.Errorf("expected %d received %d; want 2 and 2", exp, rcv)
	}
	sec := c.col.collect()
	if sec.received != 3 || sec.other != 1 || sec.foreign != 0 {
		t.Errorf("received %d other %d foreign %d; want 3, 1, 0", sec.received, sec.other, sec.foreign)
	}
}

func TestParseTalk(t *testing.T) {
	v := &vu{id: 17}
	talk := appendTalk(nil, v, 4, 1795383601123000000)
	if d := parseData(talk); !d.ok || d.vu != 17 || d.seq != 4 || d.ts != 1795383601123000000 {
		t.Errorf("TALK data %s parsed as %+v", talk, d)
	}
	for in, want := range map[string]dataFields{
		// A NOTIFY carries the TALK's message, not its fields.
		`{"from":"b1-u17","message":"vu=17 seq=4 ts=99","offset":12,"room":"b1-r0","time":"2026-11-21T20:51:54.253Z"}`: {vu: 17, seq: 4, ts: 99, ok: true},
		`{"message":"ENTER"}`: {},
		`{"type":"LEAVE","sender":"b1-u3","roomId":"b1-r0","reason":"disconnected"}`: {},
		`{"message":"vu=17 seq=4"}`:           {},
		`{"message":"vu=17 seq=4 ts=99 and"}`: {},
		`{"message":"vu=1x seq=4 ts=99"}`:     {},
		`{"message":"vu= seq=4 ts=99"}`:       {},
	} {
		if got := parseData([]byte(in)); got != want {
			t.Errorf("parseData(%s) = %+v, want %+v", in, got, want)
		}
	}
	var m wireMsg
	if err := parseMsg([]byte(`{"user":"b1-u0","token":"abc.def","expires":"2026-11-22T20:00:00Z"}`), &m); err != nil || string(m.token) != "abc.def" {
		t.Errorf("login answer: token %q, %v", m.token, err)
	}
}
