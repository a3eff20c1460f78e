// The interface every transport implements, and what they share.
//
//   const t = new SomeTransport({origin, token, user, authorize});
//   t.on('message', (pub) => ...);  // {topic, offset, epoch, time, sender, type, data}
//   t.on('gap', (g) => ...);        // {topic, epoch, reason} and since (a resume was refused)
//                                   // or offset (live: the next message's): history is gone
//   t.on('state', (s) => ...);      // {state: connecting|live|resuming|offline|closed, detail}
//   t.on('error', (e) => ...);      // {topic?, code, reason}: a refusal not tied to a publish
//   t.connect(['chat/lobby'], new Map([['chat/lobby', {offset: 3, epoch: 'mq3k9x'}]]));
//   t.subscribe('location/7', {offset, epoch});  t.unsubscribe('location/7');
//   await t.publish('chat/lobby', {message: 'hi'}, 'TALK');  // -> {offset, epoch}
//   t.close();
//
// A transport remembers the position {offset, epoch} of the last publication it saw on each
// topic (t.positions) and resumes from there after every reconnect, always sending the epoch
// too, so that a server that lost its history says so instead of replaying a new history as
// if it were the old one. A topic without a position starts "from now". Before reconnecting it
// calls authorize() (if given), which returns the token to use from then on.

export class Transport {
  constructor({ origin = location.origin, token = '', user = '', authorize = null } = {}) {
    this.origin = origin;
    this.token = token;
    this.user = user;
    this.authorize = authorize;
    this.topics = new Set();
    this.positions = new Map(); // topic -> {offset, epoch}
    this.state = 'closed';
    this.received = 0;
    this.reconnects = 0;
    this.handlers = { message: [], gap: [], state: [], error: [] };
    this.wasLive = false; // reached live at least once: a later live is a reconnect
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

  // connect starts the transport on topics, resuming each from since (a Map topic -> position).
  connect(topics, since = new Map()) {
    for (const t of topics) {
      this.topics.add(t);
      if (since.has(t)) this.positions.set(t, { ...since.get(t) });
    }
    this.setState('connecting');
    this.open();
  }

  subscribe(topic, pos) {
    this.topics.add(topic);
    if (pos) this.positions.set(topic, { ...pos });
    else this.positions.delete(topic);
  }

  unsubscribe(topic) {
    this.topics.delete(topic);
    this.positions.delete(topic);
  }

  close() {
    this.setState('closed');
  }

  // reauth refreshes the token before a reconnect; a failed check keeps the one we have.
  async reauth() {
    if (!this.authorize) return;
    try { this.token = await this.authorize(); } catch { /* offline: try with what we have */ }
  }

  get closed() { return this.state === 'closed'; }

  setState(state, detail = '') {
    if (this.state === 'closed' && state !== 'connecting') return;
    if (state === 'live') {
      if (this.wasLive && this.state !== 'live') this.reconnects++;
      this.wasLive = true;
    }
    if (state === this.state && detail === this.detail) return;
    this.state = state;
    this.detail = detail;
    this.emit('state', { state, detail });
  }

  // accept hands a publication to the listeners unless it is one already seen (a replay that
  // overlaps what was delivered before a reconnect). It returns whether it was new.
  accept(pub) {
    if (!this.topics.has(pub.topic)) return false;
    const pos = this.positions.get(pub.topic);
    if (pos && pos.epoch === pub.epoch && pub.offset <= pos.offset) return false;
    this.positions.set(pub.topic, { offset: pub.offset, epoch: pub.epoch });
    this.received++;
    this.emit('message', pub);
    return true;
  }

  // gap reports that publications after info.since are gone. What the server replays next
  // belongs to the new history, so the position restarts at its beginning.
  gap(info) {
    if (!this.topics.has(info.topic)) return;
    this.positions.set(info.topic, { offset: 0, epoch: info.epoch || '' });
    this.emit('gap', info);
  }

  // advance records a position learned without a publication (an empty poll answer).
  advance(topic, offset, epoch) {
    const pos = this.positions.get(topic);
    if (!pos || pos.epoch !== epoch || offset > pos.offset) this.positions.set(topic, { offset, epoch });
  }

  url(path, params = {}, scheme = '') {
    const u = new URL(path, this.origin);
    if (scheme) u.protocol = u.protocol === 'https:' ? scheme + 's:' : scheme + ':';
    for (const [k, v] of Object.entries(params)) {
      for (const one of [].concat(v)) if (one !== undefined && one !== '') u.searchParams.append(k, one);
    }
    return u.toString();
  }
}

// Backoff gives reconnect delays: doubling from min to max, with jitter so that many clients
// cut off together do not come back together.
export class Backoff {
  constructor(min = 250, max = 5000) {
    this.min = min;
    this.max = max;
    this.n = 0;
  }
  next() {
    const d = Math.min(this.max, this.min * 2 ** this.n++);
    return Math.round(d / 2 + Math.random() * d / 2);
  }
  reset() { this.n = 0; }
}

export const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// ApiError is an error answer of the server: {error, reason} with an HTTP status.
export class ApiError extends Error {
  constructor(status, code, reason) {
    super(reason || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

// publishHTTP publishes over POST /api/publish/{topic}; the HTTP transports use it.
export async function publishHTTP(t, topic, data, type) {
  const res = await fetch(t.url('/api/publish/' + topic, { type }), {
    method: 'POST',
    headers: authHeaders(t.token, { 'Content-Type': 'application/json' }),
    body: JSON.stringify(data),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new ApiError(res.status, body.error, body.reason);
  return { offset: body.offset, epoch: body.epoch };
}

export function authHeaders(token, extra = {}) {
  return token ? { ...extra, Authorization: 'Bearer ' + token } : extra;
}
