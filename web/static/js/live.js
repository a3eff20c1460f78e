// Live is the page's connection: the rtlab client library (/rtlab.js) on the transport the
// page's picker names, seen through the small interface the page was written against:
//
//   const t = new Live('ws', {token, user, authorize});
//   t.on('message', (pub) => ...);  // {topic, offset, epoch, time, sender, type, data}
//   t.on('gap', (g) => ...);        // {topic, epoch, reason, offset?}: history is gone
//   t.on('state', (s) => ...);      // {state: connecting|live|resuming|offline|closed, detail}
//   t.on('error', (e) => ...);      // {topic?, code, reason}
//   t.on('leave', (l) => ...);      // {topic, user, info}: a user's last client left a topic
//   t.connect(['chat/lobby'], new Map([['chat/lobby', {offset: 3, epoch: 'mq3k9x'}]]));
//   t.subscribe('location/7', {offset, epoch}, {presence: true});  t.unsubscribe('location/7');
//   await t.publish('chat/lobby', {message: 'hi'}, 'TALK');  // -> {offset, epoch}
//   t.close();
//
// The library resumes every topic from the last offset it delivered after every reconnect and
// drops what it already delivered; before a reconnect that failed, and whenever the server
// says the token is no good, it asks authorize() (getToken) for a token.
import { Client } from '/rtlab.js';

// The five transports, in the order the page offers them.
export const transports = [
  { id: 'shortpoll', label: 'Short polling' },
  { id: 'longpoll', label: 'Long polling' },
  { id: 'sse', label: 'Server-Sent Events' },
  { id: 'ws', label: 'WebSocket' },
  { id: 'stomp', label: 'STOMP over WebSocket' },
];

export function transportById(id) {
  return transports.find((t) => t.id === id) || transports[3];
}

export class Live {
  constructor(id, { token = '', user = '', authorize = null } = {}) {
    this.id = id;
    this.user = user;
    this.authorize = authorize;
    this.token = token;
    this.handlers = { message: [], gap: [], state: [], error: [], leave: [] };
    this.subs = new Map(); // topic → Subscription
    this.state = 'closed';
    this.detail = '';
    this.received = 0;
    this.reconnects = 0;
    this.client = null;
  }

  get topics() { return new Set(this.subs.keys()); }

  get positions() {
    const m = new Map();
    for (const [t, s] of this.subs) if (s.position) m.set(t, { ...s.position });
    return m;
  }

  on(event, fn) {
    this.handlers[event].push(fn);
    return () => { this.handlers[event] = this.handlers[event].filter((f) => f !== fn); };
  }

  emit(event, value) {
    for (const fn of this.handlers[event]) {
      try { fn(value); } catch (e) { console.error(e); }
    }
  }

  setState(state, detail = '') {
    if (state === this.state && detail === this.detail) return;
    this.state = state;
    this.detail = detail;
    this.emit('state', { state, detail });
  }

  // connect starts the connection on topics, resuming each from since (topic → position).
  connect(topics, since = new Map()) {
    this.setState('connecting');
    const c = new Client(location.origin, {
      transports: [this.id], token: this.token,
      getToken: this.authorize ? async () => (this.token = await this.authorize()) : undefined,
    });
    this.client = c;
    let wasLive = false;
    c.on('state', (s) => {
      if (s.state === 'connected') {
        if (wasLive) this.reconnects++;
        wasLive = true;
        this.setState('live');
      } else if (s.state === 'connecting' && wasLive) {
        this.setState('resuming', s.reason);
      } else if (s.state === 'disconnected') {
        this.setState('offline', s.reason);
      }
    });
    c.on('transport', (e) => { if (e.event === 'failed') this.setState(wasLive ? 'offline' : 'connecting', e.reason); });
    c.on('error', (e) => this.emit('error', { code: e.code, reason: e.message }));
    for (const t of topics) this.subscribe(t, since.get(t));
  }

  // subscribe (re)subscribes topic from pos ({offset, epoch}), or from now without it. With
  // presence, leave events come for users whose last client left.
  subscribe(topic, pos, { presence = false } = {}) {
    this.subs.get(topic)?.unsubscribe();
    const opts = pos ? { since: pos.offset, epoch: pos.epoch } : {};
    const handlers = {
      publication: (p) => { this.received++; this.emit('message', p); },
      gap: (g) => this.emit('gap', g),
      error: (e) => this.emit('error', { topic, code: e.code, reason: e.message }),
    };
    if (presence) {
      handlers.leave = (info) => {
        const still = [...sub.members.values()].some((i) => i.user === info.user);
        if (info.user && !still) this.emit('leave', { topic, user: info.user, info });
      };
    }
    const sub = this.client.subscribe(topic, opts, handlers);
    this.subs.set(topic, sub);
  }

  unsubscribe(topic) {
    this.subs.get(topic)?.unsubscribe();
    this.subs.delete(topic);
  }

  publish(topic, data, type) {
    return this.client.publish(topic, data, type ? { type } : {});
  }

  close() {
    this.client?.close();
    this.subs.clear();
    this.setState('closed');
  }
}
