package bench

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// Scenarios: the --scenario values.
const (
	ScenarioLocation = "location"
	ScenarioChat     = "chat"
	ScenarioNotify   = "notify"
)

// Scenarios returns the scenarios the bench runs.
func Scenarios() []string { return []string{ScenarioLocation, ScenarioChat, ScenarioNotify} }

// scenario is what a run's users do: what they subscribe to, what they publish, what they say
// once subscribed, and which receipts are expected. Each scenario is one value (location,
// chat, notify); the drivers, the scheduler and the accounting ask it and test no scenario
// name. A server's own dialect (its destinations, its protocol) is the driver's (stompDialect,
// the Centrifugo drivers): every scenario runs on it the same way.
type scenario interface {
	// prepare makes what the cell's users share (rooms, names unique to the cell) and sets
	// c.groups.
	prepare(c *cell)
	// user sets v's topic and role; v.id and v.group are set.
	user(c *cell, v *vu)
	// run is one activity of a's user, from its start event to its stop event.
	run(c *cell, a *activity)
	// publishTo is where v's publications go, and their type ("" for a plain publication).
	publishTo(v *vu) (topic, typ string)
	// appendData appends the data of publication seq of v, intended at ts.
	appendData(dst []byte, c *cell, v *vu, seq int, ts int64) []byte
	// greeting is what a user publishes once subscribed ("ENTER"), "" for nothing. The
	// answer to it opens the user's delivery window; without one, the subscription does.
	greeting() string
	// turn reports whether a's user publishes at its scheduled turn ts; it may instead hand
	// the session's end to q.
	turn(c *cell, a *activity, ts int64, q chan<- pubJob, done <-chan struct{}) bool
	// unmeasured counts a receipt that carries no measured publication (chat's ENTER and
	// LEAVE, a notify member's room traffic; in the location scenario a stranger's message).
	unmeasured(k *counters, size int)
	// logsIn reports whether users log in over the HTTP pool before they connect.
	logsIn() bool
}

// scenarioOptions is a scenario's part of Options: its defaults, the flags it takes and what
// the results record of it. The values that implement scenario implement it too.
type scenarioOptions interface {
	// defaults fills the scenario's defaults (transports, interval, rooms) into o.
	defaults(o *Options)
	// check refuses flags the scenario cannot use; o is filled.
	check(o *Options) error
	// rtlabOnly reports whether the scenario follows rtlab's own rules (login, chat rooms,
	// owners' notifications), so that no other server can run it.
	rtlabOnly() bool
	// groups is the number of location groups, or rooms, for a run with peak users.
	groups(o *Options, peak int) int
	// record writes the scenario's settings into the results' config.
	record(o *Options, cfg *results.Config)
	// recordRun writes what a cell of the scenario measured besides the common figures (rooms,
	// logins) into run.
	recordRun(c *cell, run *results.Run)
}

// scenarioValue is one scenario: its behaviour and its options.
type scenarioValue interface {
	scenario
	scenarioOptions
}

// scenarioNamed returns the scenario --scenario names.
func scenarioNamed(name string) (scenarioValue, bool) {
	switch name {
	case ScenarioLocation:
		return locationScenario{}, true
	case ScenarioChat:
		return &chatScenario{}, true
	case ScenarioNotify:
		return &chatScenario{notify: true}, true
	}
	return nil, false
}

var (
	_ scenario        = locationScenario{}
	_ scenarioOptions = locationScenario{}
	_ scenario        = (*chatScenario)(nil)
	_ scenarioOptions = (*chatScenario)(nil)
)

// locationScenario: users in groups publish their position every interval and receive their
// group's (location/{group}).
type locationScenario struct{}

func (locationScenario) defaults(o *Options) {
	if len(o.Transports) == 0 {
		o.Transports = Transports()
	}
	if o.Interval == 0 {
		o.Interval = 3 * time.Second
	}
}

func (locationScenario) check(o *Options) error {
	if o.Hold {
		return usageErr("--hold", "applies to the chat scenario (location users always hold their connection)")
	}
	return nil
}

func (locationScenario) groups(o *Options, peak int) int {
	if o.Groups > 0 {
		return o.Groups
	}
	return max(1, (peak+o.GroupSize-1)/o.GroupSize)
}

func (locationScenario) rtlabOnly() bool                     { return false }
func (locationScenario) record(*Options, *results.Config)    {}
func (locationScenario) recordRun(*cell, *results.Run)       {}
func (locationScenario) prepare(c *cell)                     { c.groups = c.opts.groupsFor(c.plan.Peak) }
func (locationScenario) user(_ *cell, v *vu)                 { v.topic = "location/" + strconv.Itoa(v.group) }
func (locationScenario) publishTo(v *vu) (topic, typ string) { return v.topic, "" }
func (locationScenario) greeting() string                    { return "" }
func (locationScenario) logsIn() bool                        { return false }

func (locationScenario) run(c *cell, a *activity) {
	c.drv.run(a)
	a.closeWindow()
}

func (locationScenario) appendData(dst []byte, c *cell, v *vu, seq int, ts int64) []byte {
	return appendData(dst, c.opts.Seed, v, seq, ts)
}

// turn: a user publishes while it is subscribed and staying.
func (locationScenario) turn(_ *cell, a *activity, _ int64, _ chan<- pubJob, _ <-chan struct{}) bool {
	return a.estab.Load() != 0 && !a.stopping.Load()
}

func (locationScenario) unmeasured(k *counters, size int) { k.foreign++; k.bytesIn += int64(size) }

// chatScenario: users in rooms log in, ENTER, TALK and LEAVE (chat.go). With notify, user r
// owns room r and watches notify/{owner}; the others TALK, and what is measured is the NOTIFY
// each TALK makes the server publish to the owner.
type chatScenario struct {
	notify bool
}

func (s *chatScenario) defaults(o *Options) {
	if len(o.Transports) == 0 {
		o.Transports = Transports()
		if s.notify {
			o.Transports = NotifyTransports()
		}
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	if o.RoomSize == 0 {
		o.RoomSize = 50
		if s.notify {
			o.RoomSize = 10
		}
	}
	if s.notify {
		o.Hold = true // an owner watches for as long as it stays
	}
}

func (s *chatScenario) check(o *Options) error {
	if s.notify && o.RoomSize < 2 {
		return usageErr("--room-size", "%d: a notify room needs its owner and at least one member; want 2 or more", o.RoomSize)
	}
	if !o.Hold && time.Duration(o.Talks)*o.Interval <= o.Grace {
		// A session leaves one interval after its last TALK turn; a receiver must stay the grace
		// period after a publication for it to be expected.
		return usageErr("--talks", "%d TALKs every %s make sessions no longer than the grace period (%s): no TALK would be expected anywhere; raise --talks or --interval, lower --grace, or use --hold", o.Talks, o.Interval, o.Grace)
	}
	return nil
}

func (*chatScenario) groups(o *Options, peak int) int {
	return max(1, (peak+o.RoomSize-1)/o.RoomSize)
}

func (*chatScenario) record(o *Options, cfg *results.Config) {
	cfg.RoomSize, cfg.Hold = o.RoomSize, o.Hold
	if !o.Hold {
		cfg.Talks = o.Talks
	}
	cfg.GroupSize = 0
}

func (*chatScenario) recordRun(c *cell, run *results.Run) {
	run.Rooms = c.groups
	k, col := c.col.c, c.col
	run.Login = &results.Login{Tried: k.loginTried, Failed: k.loginFailed, Latency: latencies(col.total[histLogin])}
}

func (*chatScenario) prepare(c *cell) {
	c.groups = c.opts.groupsFor(c.plan.Peak)
	// Names unique to the cell, so that runs against one --target never share a room (the
	// server keeps chat history, owners included, across runs).
	c.tag = "b" + strconv.FormatUint(uint64(rand.Uint32()), 36)
	c.ownerIn = make([]chan struct{}, c.groups)
	c.ownerOnce = make([]sync.Once, c.groups)
	for r := range c.ownerIn {
		c.ownerIn[r] = make(chan struct{})
	}
}

func (s *chatScenario) user(c *cell, v *vu) {
	v.name = c.tag + "-u" + strconv.Itoa(v.id)
	v.room = "chat/" + c.tag + "-r" + strconv.Itoa(v.group)
	v.topic = v.room
	if s.notify {
		// User g starts first of room g (users start in id order) and leaves last.
		v.owner = v.id == v.group
		v.measured, v.talker = v.owner, !v.owner
		if v.owner {
			v.topic = "notify/" + v.name
		}
	}
}

func (*chatScenario) rtlabOnly() bool                     { return true }
func (*chatScenario) publishTo(v *vu) (topic, typ string) { return v.room, "TALK" }
func (*chatScenario) greeting() string                    { return "ENTER" }
func (*chatScenario) logsIn() bool                        { return true }

func (*chatScenario) appendData(dst []byte, _ *cell, v *vu, seq int, ts int64) []byte {
	return appendTalk(dst, v, seq, ts)
}

// turn: a user TALKs in its session's turns once it has entered, and hands its LEAVE to the
// workers when they are over.
func (*chatScenario) turn(c *cell, a *activity, ts int64, q chan<- pubJob, done <-chan struct{}) bool {
	if !c.chatTurn(a, ts, q, done) {
		return false
	}
	return a.estab.Load() != 0 && !a.stopping.Load() && a.entered.Load() && !a.leaving.Load() && !a.sessDone.Load()
}

// unmeasured: ENTER and LEAVE, or a notify member's chat traffic.
func (*chatScenario) unmeasured(k *counters, size int) { k.other++; k.bytesIn += int64(size) }

func (s *chatScenario) run(c *cell, a *activity) { c.runChat(a, s.notify) }
