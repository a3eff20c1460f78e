// Generated from rtlab.js by build-cjs.mjs: edit rtlab.js, then run node build-cjs.mjs.
'use strict';

// rtlab.js: the rtlab client. One ES module, no dependencies, for browsers and Node 20+.
//
//   import { Client } from '/rtlab.js';
//   const c = new Client('http://127.0.0.1:8080', { token, getToken });
//   const sub = c.subscribe('news/lobby', { since: 0 }, { publication(p) {}, gap(g) {}, state(s) {} });
//   await c.publish('news/lobby', { text: 'hi' });
//   c.close();
//
// It speaks five transports, tried in the order given (default ws, stomp, sse, longpoll,
// shortpoll). Every subscription remembers the position {offset, epoch} of the last
// publication it delivered; whenever the client reconnects, on the same transport or the next
// one, every subscription resumes from there, and publications it already delivered are
// dropped: nothing lost, nothing twice, in order. When a transport cannot connect, or keeps
// failing, the client moves to the next; while it is not on the first, it checks now and then
// whether a better one works again and moves back. A connection that goes silent for
// maxSilence is dead, whatever the socket says: the client reconnects and resumes. See
// README.md for the options.

const ALL = ['ws', 'stomp', 'sse', 'longpoll', 'shortpoll'];
const WS_OPEN = 1;

const defaults = {
  transports: ALL,
  minBackoff: 250, // ms: first reconnect delay; doubles per failure, with jitter
  maxBackoff: 8000,
  connectTimeout: 5000, // a transport not live by then has failed
  maxSilence: 20000, // a live connection that says nothing for this long is dead
  keepRecent: 60000, // a transport that delivered this recently is retried before the next
  minLive: 5000, // a connection that drops sooner counts as failing
  failures: 3, // failures in a row before moving to the next transport
  retryBetter: 60000, // how often to check whether a better transport works again
  pollInterval: 1000, // short polling
  longPollWait: 25, // seconds a long poll waits (at most maxSilence / 2)
  presenceInterval: 5000, // polling transports read presence this often
  refreshBefore: 30000, // ask getToken this long before the token expires
};

// RtlabError is a refusal or failure: code is the server's ("forbidden", "bad_topic", ...)
// or the client's ("closed", "timeout", "network").
class RtlabError extends Error {
  constructor(code, reason, status = 0) {
    super(reason || code);
    this.name = 'RtlabError';
    this.code = code;
    this.status = status;
  }
}

class Emitter {
  constructor() { this._on = new Map(); }

  // on registers fn for event and returns a function that removes it.
  on(event, fn) {
    if (!this._on.has(event)) this._on.set(event, new Set());
    this._on.get(event).add(fn);
    return () => this._on.get(event)?.delete(fn);
  }

  _emit(event, value) {
    for (const fn of this._on.get(event) || []) {
      try { fn(value); } catch (e) { console.error(e); }
    }
  }
}

// retriable are the codes of a publish that a retry with the same key may still publish once.
const retriable = new Set(['unavailable', 'outcome_unknown', 'timeout', 'network', 'closed']);

// newKey is a publish's idempotency key: random, 32 hex digits.
const newKey = () => {
  if (globalThis.crypto?.randomUUID) return globalThis.crypto.randomUUID().replaceAll('-', '');
  return Array.from({ length: 4 }, () => Math.floor(Math.random() * 2 ** 32).toString(16).padStart(8, '0')).join('');
};

// sleep waits ms, or less when signal aborts; it leaves no listener behind either way.
const sleep = (ms, signal) => new Promise((resolve) => {
  if (signal?.aborted) return resolve();
  const done = () => { clearTimeout(t); signal?.removeEventListener('abort', done); resolve(); };
  const t = setTimeout(done, ms);
  signal?.addEventListener('abort', done);
});

// linked returns an AbortController that aborts with parent, and a function that unlinks it:
// a request's own controller, so that nothing accumulates on the transport's signal.
function linked(parent) {
  const ctl = new AbortController();
  const abort = () => ctl.abort();
  if (parent.aborted) ctl.abort();
  else parent.addEventListener('abort', abort);
  return { ctl, unlink: () => parent.removeEventListener('abort', abort) };
}

// jwtExpiry returns a JWT's exp in ms since the epoch, or 0.
function jwtExpiry(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const exp = JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4))).exp;
    return Number.isFinite(exp) ? exp * 1000 : 0;
  } catch {
    return 0;
  }
}

const presenceKey = (i) => `${i.node}/${i.client}`;

// Subscription is one topic's subscription. Its handlers are called in order:
// publication(p) for each publication once, gap(g) when history the client needed is gone,
// state(s) as the subscription goes subscribing → subscribed (again after a reconnect),
// presence(list) with who is there (when asked for), join(info) and leave(info) after it,
// error(e) when the server refused it (it then ends). sub.on(event, fn) adds more handlers.
class Subscription extends Emitter {
  constructor(client, topic, opts, handlers) {
    super();
    this.client = client;
    this.topic = topic;
    this.handlers = handlers || {};
    this.position = opts.since === undefined || opts.since === null
      ? null : { offset: Number(opts.since), epoch: opts.epoch || '' };
    this.wantsPresence = !!(opts.presence || this.handlers.presence || this.handlers.join || this.handlers.leave);
    this.members = new Map(); // presence: node/client → info
    this.sawPresence = false;
    this.state = 'subscribing';
    this.received = 0;
  }

  _call(name, v) {
    const fn = this.handlers[name];
    if (fn) {
      try { fn.call(this.handlers, v); } catch (e) { console.error(e); }
    }
    this._emit(name, v);
  }

  // _deliver hands p over unless it was delivered before (a replay after a reconnect).
  _deliver(p) {
    if (this.state === 'unsubscribed') return;
    const pos = this.position;
    if (pos && pos.epoch === p.epoch && p.offset <= pos.offset) return;
    this.position = { offset: p.offset, epoch: p.epoch };
    this.received++;
    this._call('publication', p);
  }

  // _gap: what comes next does not continue our history. A notice's offset is that of the
  // first publication after it (docs/protocol.md), so the position goes on from just before;
  // a poll's notice has none, and its publications follow in the same answer.
  _gap(g) {
    if (this.state === 'unsubscribed') return;
    const at = Number(g.offset) > 0 ? Number(g.offset) - 1 : 0;
    this.position = { offset: at, epoch: g.epoch || '' };
    this._call('gap', { topic: this.topic, offset: g.offset, epoch: g.epoch, reason: g.reason });
  }

  // _advance records a position learned without a publication: where a "from now"
  // subscription starts (fromNowOnly: a subscribe's answer, which comes before any replay), or
  // an empty poll answer's.
  _advance(offset, epoch, fromNowOnly = false) {
    const pos = this.position;
    if (!pos) this.position = { offset, epoch };
    else if (!fromNowOnly && (pos.epoch !== epoch || offset > pos.offset)) this.position = { offset, epoch };
  }

  _state(state, reason = '') {
    if (this.state === 'unsubscribed' || (this.state === state && !reason)) return;
    this.state = state;
    this._call('state', { state, transport: this.client.transport, reason });
  }

  _error(code, reason) { this._call('error', new RtlabError(code, reason)); }

  // _refused: the server refused the subscription. Unless it is a passing trouble (the broker
  // is away) the subscription ends, so that reconnects do not ask again.
  _refused(code, reason) {
    if (['closed', 'timeout', 'unavailable', 'internal', 'rate_limited'].includes(code)) return;
    if (this.state === 'unsubscribed') return;
    this.refused = true; // the server holds no subscription to end
    this._error(code, reason);
    this.unsubscribe();
  }

  // _presence takes a full list: after the first, differences are told as joins and leaves.
  _presence(list) {
    const next = new Map(list.map((i) => [presenceKey(i), i]));
    if (this.sawPresence) {
      for (const [k, i] of this.members) if (!next.has(k)) this._call('leave', i);
      for (const [k, i] of next) if (!this.members.has(k)) this._call('join', i);
    }
    this.members = next;
    this.sawPresence = true;
    this._call('presence', list);
  }

  _join(i) {
    const k = presenceKey(i);
    if (this.members.has(k)) return;
    this.members.set(k, i);
    this._call('join', i);
  }

  _leave(i) {
    if (this.members.delete(presenceKey(i))) this._call('leave', i);
  }

  // unsubscribe stops the subscription.
  unsubscribe() {
    if (this.state === 'unsubscribed') return;
    this.client._remove(this);
    this._state('unsubscribed');
  }
}

// Client connects to an rtlab server and carries any number of subscriptions.
class Client extends Emitter {
  constructor(url, opts = {}) {
    super();
    const o = { ...defaults, ...opts };
    this.opts = o;
    this.base = String(url || (globalThis.location && globalThis.location.origin)).replace(/\/+$/, '');
    this.token = o.token || '';
    this.getToken = o.getToken || null;
    this.WebSocket = o.WebSocket || globalThis.WebSocket;
    this.fetch = o.fetch || globalThis.fetch.bind(globalThis);
    this.silence = Math.max(500, o.maxSilence);
    this.names = o.transports.filter((n) => ALL.includes(n) && this._can(n));
    if (!this.names.length) throw new RtlabError('bad_request', `no usable transport in ${o.transports}`);
    this.subs = new Map(); // topic → Subscription
    this.index = 0;
    this.t = null; // the current transport
    this.state = 'connecting';
    this.clientId = '';
    this.failures = 0; // in a row, on this transport
    this.worked = new Set(); // transports that reached live at least once
    this.delivered = {}; // transport → when it last brought something
    this.probes = new Set(); // transports being tried by _tryBetter
    this.backoffN = 0;
    this.timers = {};
    this.closed = false;
    this.unresolved = null; // a publish of unknown outcome, which later ones wait for
    this._scheduleRefresh();
    queueMicrotask(() => this._open());
  }

  _can(name) {
    if (name === 'ws' || name === 'stomp') return typeof this.WebSocket === 'function';
    if (name === 'sse') return typeof ReadableStream === 'function';
    return true;
  }

  // transport is the name of the transport in use (or being tried).
  get transport() { return this.names[this.index]; }

  // subscribe starts a subscription to topic. opts.since resumes after that offset (0: from
  // the oldest retained publication), with opts.epoch the epoch it belongs to; without since
  // it starts from now. opts.presence (or a presence, join or leave handler) asks for presence.
  subscribe(topic, opts = {}, handlers = {}) {
    if (this.closed) throw new RtlabError('closed', 'client is closed');
    if (this.subs.has(topic)) throw new RtlabError('bad_request', `already subscribed to ${topic}`);
    const sub = new Subscription(this, topic, opts, handlers);
    this.subs.set(topic, sub);
    this.t?.add(sub);
    return sub;
  }

  _remove(sub) {
    if (this.subs.get(sub.topic) !== sub) return;
    this.subs.delete(sub.topic);
    this.t?.remove(sub);
  }

  // publish publishes data on topic (over the socket on ws and stomp, else over HTTP) and
  // resolves to {topic, offset, epoch}, with duplicate: true when a retry found it published.
  // opts.type sets the publication's type. Each publish carries an idempotency key (opts.idem,
  // or a new one): an answer that leaves it unpublished or its outcome open (unavailable,
  // outcome_unknown, a timeout, a lost connection) is retried with that key up to opts.retries
  // (5) times, so that it is published once. Publishes made meanwhile wait for it (the server
  // holds a socket's too), so that it does not land after them.
  async publish(topic, data, opts = {}) {
    if (this.closed) throw new RtlabError('closed', 'client is closed');
    const idem = opts.idem || newKey();
    for (let attempt = 0; ; attempt++) {
      while (this.unresolved && this.unresolved.idem !== idem) await this.unresolved.done;
      try {
        const ack = await this._publishOnce(topic, data, opts.type, idem);
        this._resolved(idem);
        return ack;
      } catch (e) {
        if (e.code !== 'unavailable' && retriable.has(e.code) && !this.unresolved) { // no answer: it may land
          let release;
          this.unresolved = { idem, done: new Promise((r) => { release = r; }), release };
        }
        if (this.closed || attempt >= (opts.retries ?? 5) || !retriable.has(e.code)) {
          this._resolved(idem); // given up: the others go on
          throw e;
        }
        await sleep(Math.max(e.retryAfter || 0, Math.min(this.opts.maxBackoff, this.opts.minBackoff * 2 ** attempt)));
      }
    }
  }

  // _resolved lets the publishes waiting for idem's outcome go on.
  _resolved(idem) {
    if (this.unresolved?.idem !== idem) return;
    this.unresolved.release();
    this.unresolved = null;
  }

  _publishOnce(topic, data, type, idem) {
    if (this.t?.publish && this.state === 'connected') return this.t.publish(topic, data, type, idem);
    const q = type ? { type } : {};
    return this._http('POST', '/api/publish/' + topic, q, data, undefined, 0, { 'Idempotency-Key': idem });
  }

  // presence reads who is connected to topic: {topic, clients, users}.
  presence(topic) { return this._http('GET', `/api/topics/${topic}/presence`); }

  // history reads topic's retained publications after since: {topic, epoch, offset,
  // recovered, publications}. With before (an offset; 0 for the newest) it pages back instead:
  // at most limit publications older than before, oldest first, and the offset to ask next.
  history(topic, { since = 0, limit, epoch, before } = {}) {
    if (before !== undefined && before !== null) return this._http('GET', `/api/topics/${topic}/history`, { before, limit, epoch });
    return this._http('GET', `/api/topics/${topic}/history`, { since, limit, epoch });
  }

  // close ends the connection and every subscription, and leaves no timer or request behind.
  close() {
    if (this.closed) return;
    this._stop();
    for (const s of this.subs.values()) s._state('unsubscribed');
    this.subs.clear();
    this._setState('closed');
  }

  // _stop ends everything that runs: timers, the transport, probes.
  _stop() {
    this.closed = true;
    for (const t of Object.values(this.timers)) clearTimeout(t);
    this.timers = {};
    this.t?.close();
    this.t = null;
    for (const p of this.probes) p.close();
    this.probes.clear();
  }

  _setState(state, reason = '') {
    if (this.state === state && !reason) return;
    this.state = state;
    this._emit('state', { state, transport: this.transport, reason });
  }

  _timer(name, ms, fn) {
    clearTimeout(this.timers[name]);
    if (this.closed) return;
    this.timers[name] = setTimeout(() => { delete this.timers[name]; fn(); }, ms);
  }

  _url(path, params = {}, scheme = '') {
    const u = new URL(this.base + path);
    if (scheme) u.protocol = u.protocol === 'https:' ? scheme + 's:' : scheme + ':';
    for (const [k, v] of Object.entries(params)) {
      for (const one of [].concat(v)) if (one !== undefined && one !== null && one !== '') u.searchParams.append(k, one);
    }
    return u.toString();
  }

  _headers(extra = {}) {
    return this.token ? { ...extra, Authorization: 'Bearer ' + this.token } : extra;
  }

  // _http makes a JSON request; a refused token is refreshed through getToken and the request
  // tried once more, unless it is a transport's own (signal given): that transport then
  // reconnects, as the others do when the server refuses their token.
  async _http(method, path, params = {}, body, signal, timeout = 0, headers = {}) {
    for (let attempt = 0; ; attempt++) {
      const init = { method, headers: this._headers(headers), cache: 'no-store' };
      if (body !== undefined) {
        init.headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      const own = signal ? linked(signal) : null;
      let timer;
      if (own) {
        init.signal = own.ctl.signal;
        if (timeout) timer = setTimeout(() => { own.timedOut = true; own.ctl.abort(); }, timeout);
      }
      let res, data;
      try {
        res = await this.fetch(this._url(path, params), init);
        data = await res.json().catch(() => ({}));
      } catch (e) {
        if (own?.timedOut) throw new RtlabError('timeout', `${method} ${path}: no answer within ${timeout} ms`);
        if (signal?.aborted) throw e;
        throw new RtlabError('network', `${method} ${path}: ${e.message}`);
      } finally {
        clearTimeout(timer);
        own?.unlink();
      }
      if (res.ok) return data;
      if (res.status === 401 && attempt === 0 && this.getToken && !signal) {
        await this._refreshToken();
        continue;
      }
      const err = new RtlabError(data.error || 'http', data.reason || `${method} ${path}: HTTP ${res.status}`, res.status);
      err.retryAfter = Number(res.headers.get('Retry-After')) * 1000 || 0;
      throw err;
    }
  }

  // ---- tokens --------------------------------------------------------------------------

  _scheduleRefresh() {
    const exp = jwtExpiry(this.token);
    if (!exp || !this.getToken || this.closed) return;
    const left = exp - Date.now();
    const before = Math.min(this.opts.refreshBefore, Math.max(1000, left / 3));
    this._timer('refresh', Math.max(1000, left - before), () => this._freshToken());
  }

  // _refreshToken gets a new token and gives it to the live connection (WebSocket and STOMP
  // refresh in place; SSE and polling send it with their next request). A getToken that gives
  // no token rejects with unauthorized.
  _refreshToken() {
    if (!this.getToken) return Promise.resolve(this.token);
    this.refreshing ??= (async () => {
      try {
        const tok = await this.getToken();
        if (typeof tok !== 'string' || !tok) throw new RtlabError('unauthorized', 'getToken gave no token');
        this.token = tok;
        this.tokenFresh = true;
        if (!this.closed) {
          this._scheduleRefresh();
          this.t?.refresh?.(tok).catch(() => {});
        }
        return tok;
      } finally {
        this.refreshing = null;
      }
    })();
    return this.refreshing;
  }

  // _freshToken asks getToken for the next attempt's token. A getToken that throws, or gives a
  // token that has already expired, is told as an error event (token_error, token_expired): the
  // caller waits a backoff step before asking again. One that gives no token means there is
  // none for good: the client stops with disconnect.
  async _freshToken() {
    try {
      await this._refreshToken();
    } catch (e) {
      if (this.closed) return false;
      if (e instanceof RtlabError && e.code === 'unauthorized') {
        this._disconnect({ code: 'unauthorized', reason: e.message, reconnect: false });
        return false;
      }
      this._emit('error', new RtlabError('token_error', `getToken failed: ${e?.message || e}`));
      return false;
    }
    if (this.closed) return false;
    const exp = jwtExpiry(this.token);
    if (exp && exp <= Date.now()) {
      this._emit('error', new RtlabError('token_expired', 'getToken gave a token that has already expired'));
      return false;
    }
    return true;
  }

  _expiring() {
    const exp = jwtExpiry(this.token);
    return exp && exp - Date.now() < 5000;
  }

  // ---- connection ----------------------------------------------------------------------

  _open() {
    if (this.closed) return;
    const name = this.transport;
    const T = { ws: WSTransport, stomp: StompTransport, sse: SSETransport, longpoll: PollTransport, shortpoll: PollTransport }[name];
    const t = new T(this, name);
    this.t = t;
    this._setState('connecting');
    for (const s of this.subs.values()) s._state('subscribing');
    this._timer('connect', this.opts.connectTimeout, () => this._down(t, new RtlabError('timeout', `${name}: not connected within ${this.opts.connectTimeout} ms`)));
    this._emit('transport', { transport: name, event: 'trying' });
    t.open();
  }

  // _live is called by a transport once it is connected and its subscriptions are sent.
  _live(t) {
    if (t !== this.t || this.closed || t.liveAt) return;
    clearTimeout(this.timers.connect);
    t.liveAt = t.heard = Date.now();
    this.worked.add(t.name);
    this.backoffN = 0;
    this.tokenFresh = false;
    this._setState('connected');
    this._emit('transport', { transport: t.name, event: 'connected' });
    this._watch(t);
    if (this.index > 0) this._timer('better', this.opts.retryBetter, () => this._tryBetter());
  }

  // _heard is called by a transport for everything the server sends: the connection is alive.
  _heard(t, delivered = false) {
    if (t !== this.t) return;
    t.heard = Date.now();
    if (delivered) this.delivered[t.name] = t.heard;
  }

  // _watch checks a live connection for silence: the server writes at least every ping or
  // heart-beat interval, so one silent for maxSilence is gone (a black hole, a dead NAT entry,
  // a laptop that slept) even when its socket looks open. Half way, a transport that can ask
  // for an answer (WebSocket ping) does.
  _watch(t) {
    const every = Math.max(100, this.silence / 4);
    this._timer('silence', every, () => {
      if (t !== this.t || this.closed) return;
      const quiet = Date.now() - t.heard;
      if (quiet >= this.silence) {
        this._down(t, new RtlabError('timeout', `${t.name}: nothing heard for ${quiet} ms (maxSilence)`));
        return;
      }
      if (quiet >= this.silence / 2) t.ping?.();
      this._watch(t);
    });
  }

  // _disconnect stops the client for good: the server or getToken said not to come back.
  _disconnect(bye) {
    const why = bye.reason || bye.code;
    this._stop();
    this._setState('disconnected', why);
    this._emit('disconnect', bye);
    for (const s of this.subs.values()) s._state('unsubscribed', why);
  }

  // _down is called by a transport that failed or was closed by the server. bye is what the
  // server said ({code, reason, reconnect}), if anything.
  _down(t, err, bye = null) {
    if (t !== this.t || this.closed) return;
    t.close();
    this.t = null;
    for (const n of ['connect', 'better', 'silence']) clearTimeout(this.timers[n]);
    const reason = err?.message || String(err);
    this._emit('transport', { transport: t.name, event: 'failed', reason });
    const tokenCode = bye && (bye.code === 'token_expired' || bye.code === 'unauthorized');
    if (bye && bye.reconnect === false && !tokenCode) {
      this._disconnect(bye); // an operator disconnected this client
      return;
    }
    if (bye?.code === 'unauthorized' && this.tokenFresh) {
      // A token fresh from getToken refused again: it is not a matter of time.
      this._disconnect({ ...bye, reconnect: false });
      return;
    }
    const lived = t.liveAt ? Date.now() - t.liveAt : 0;
    this.failures = lived >= this.opts.minLive ? 1 : this.failures + 1;
    this.hung = !t.liveAt && err?.code === 'timeout' ? (this.hung || 0) + 1 : 0;
    let delay = this._backoff();
    // A transport that delivered within keepRecent is retried, with backoff, before the next is
    // tried: a server restart or a short outage is no reason to walk down the list. Only a path
    // that hangs (twice not up within connectTimeout: an upgrade or a stream held by a proxy)
    // makes the client move on sooner.
    const recent = Date.now() - (this.delivered[t.name] || 0) < this.opts.keepRecent;
    const moveOn = this.names.length > 1 && (recent ? this.hung >= 2
      : !this.worked.has(t.name) || this.failures >= this.opts.failures);
    if (moveOn) {
      this.failures = this.hung = 0;
      this.index = (this.index + 1) % this.names.length;
      if (this.index !== 0) delay = 0; // straight to the next; a full round backs off
    }
    this._setState('connecting', `${t.name}: ${reason}`);
    // A browser does not tell why a WebSocket could not connect: a refused token looks like any
    // failure. So a connection that never came up asks for a token too.
    const tokenTrouble = tokenCode || (!t.liveAt && this.token);
    this._timer('reconnect', delay, () => this._reconnect(tokenTrouble));
  }

  // _reconnect opens the transport again, with a new token first when the old one is the
  // trouble; a token that cannot be had waits a backoff step (one getToken call per step).
  async _reconnect(tokenTrouble) {
    if (this.closed) return;
    if (this.getToken && (tokenTrouble || this._expiring()) && !(await this._freshToken())) {
      if (!this.closed) this._timer('reconnect', this._backoff(), () => this._reconnect(true));
      return;
    }
    this._open();
  }

  _backoff() {
    const d = Math.min(this.opts.maxBackoff, this.opts.minBackoff * 2 ** this.backoffN++);
    return Math.round(d / 2 + (Math.random() * d) / 2);
  }

  // _tryBetter checks whether a transport better than the current one connects now; if one
  // does, the client moves to it, resuming every subscription.
  async _tryBetter() {
    const current = this.t;
    for (let i = 0; i < this.index && !this.closed; i++) {
      const name = this.names[i];
      if (name === 'longpoll' || name === 'shortpoll' || this.t !== current) continue;
      const T = name === 'ws' ? WSTransport : name === 'stomp' ? StompTransport : SSETransport;
      const probe = new T(this, name);
      this.probes.add(probe);
      const ok = await probe.probe().catch(() => false);
      probe.close();
      this.probes.delete(probe);
      if (ok && this.t === current && !this.closed) {
        this._emit('transport', { transport: name, event: 'upgrading' });
        current.close();
        this.t = null;
        this.index = i;
        this.failures = 0;
        this._open();
        return;
      }
    }
    if (this.t === current && !this.closed) this._timer('better', this.opts.retryBetter, () => this._tryBetter());
  }

  // _since are the positions to resume from.
  _since(sub) { return sub.position ? { since: sub.position.offset, epoch: sub.position.epoch } : {}; }
}

// ---- WebSocket (JSON protocol on /api/ws) ----------------------------------------------------

class WSTransport {
  constructor(c, name) {
    this.c = c;
    this.name = name;
    this.ws = null;
    this.seq = 0;
    this.pending = new Map(); // id → {resolve, reject, timer}
    this.bye = null;
  }

  _dial(onMsg, onClose) {
    const ws = new this.c.WebSocket(this.c._url('/api/ws', { access_token: this.c.token }, 'ws'));
    ws.onmessage = (e) => {
      let m;
      try { m = JSON.parse(typeof e.data === 'string' ? e.data : String(e.data)); } catch { return; }
      this.c._heard(this, m.op === 'message');
      onMsg(m);
    };
    ws.onclose = (e) => onClose(e);
    ws.onerror = () => {};
    return ws;
  }

  open() {
    this.ws = this._dial((m) => this.handle(m), (e) => {
      this.failPending(new RtlabError('closed', 'connection closed'));
      const why = this.bye ? `${this.bye.code}: ${this.bye.reason}` : `closed (${e.code}${e.reason ? ' ' + e.reason : ''})`;
      this.c._down(this, new RtlabError(this.bye?.code || 'closed', why), this.bye);
    });
  }

  // probe connects and resolves whether the server said connected; close() ends it.
  probe() {
    return new Promise((resolve) => {
      const done = (ok) => { clearTimeout(this.probeTimer); resolve(ok); };
      this.ws = this._dial((m) => { if (m.op === 'connected') done(true); }, () => done(false));
      this.probeTimer = setTimeout(() => done(false), this.c.opts.connectTimeout);
    });
  }

  // ping asks the server for an answer when the connection has been quiet (see Client._watch).
  ping() {
    if (Date.now() - (this.pinged || 0) < this.c.silence / 4) return;
    this.pinged = Date.now();
    this.send({ op: 'ping' });
  }

  send(msg) {
    if (this.ws?.readyState !== WS_OPEN) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  handle(m) {
    const c = this.c;
    if (c.t !== this) return;
    const sub = m.topic !== undefined ? c.subs.get(m.topic) : undefined;
    switch (m.op) {
      case 'connected':
        c.clientId = m.client;
        this.ready = true;
        for (const s of c.subs.values()) this.add(s);
        c._live(this);
        break;
      case 'subscribed':
        if (!sub) break;
        sub._advance(m.offset, m.epoch, true); // not recovered: a gap follows
        sub._state('subscribed');
        break;
      case 'message':
        delete m.op;
        sub?._deliver(m);
        break;
      case 'gap': sub?._gap(m); break;
      case 'presence': sub?._presence(m.clients || []); break;
      case 'join': sub?._join(m.info); break;
      case 'leave': sub?._leave(m.info); break;
      case 'ack': this.settle(m.id, null, { topic: m.topic, offset: m.offset, epoch: m.epoch, ...(m.duplicate && { duplicate: true }) }); break;
      case 'refreshed': this.settle(this.refreshId, null, m); break;
      case 'error':
        if (m.id !== undefined && this.pending.has(m.id)) this.settle(m.id, new RtlabError(m.code, m.reason));
        else if (sub) sub._refused(m.code, m.reason);
        else c._emit('error', new RtlabError(m.code, m.reason));
        break;
      case 'disconnect': this.bye = { code: m.code, reason: m.reason, reconnect: m.reconnect }; break;
    }
  }

  // add subscribes; before the server said connected, that does it for every subscription.
  add(sub) {
    if (!this.ready) return;
    const msg = { op: 'subscribe', topic: sub.topic, ...this.c._since(sub) };
    if (sub.wantsPresence) msg.presence = true;
    this.send(msg);
  }

  // remove unsubscribes; a subscription the server refused has nothing to end there.
  remove(sub) { if (this.ready && !sub.refused) this.send({ op: 'unsubscribe', topic: sub.topic }); }

  request(msg, timeoutMsg) {
    const id = ++this.seq;
    return new Promise((resolve, reject) => {
      if (!this.send({ ...msg, id })) return reject(new RtlabError('closed', 'not connected'));
      const timer = setTimeout(() => this.settle(id, new RtlabError('timeout', timeoutMsg)), 10000);
      this.pending.set(id, { resolve, reject, timer });
    }).finally(() => { if (this.refreshId === id) this.refreshId = undefined; });
  }

  publish(topic, data, type, idem) {
    const msg = { op: 'publish', topic, data, idem };
    if (type) msg.type = type;
    return this.request(msg, 'no ack within 10 s');
  }

  // refresh hands the connection a new token: {"op":"refresh","token"} → {"op":"refreshed"}.
  refresh(token) {
    const p = this.request({ op: 'refresh', token }, 'no answer to refresh within 10 s');
    this.refreshId = this.seq;
    return p;
  }

  settle(id, err, value) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (err) p.reject(err);
    else p.resolve(value);
  }

  failPending(err) { for (const id of [...this.pending.keys()]) this.settle(id, err); }

  close() {
    clearTimeout(this.probeTimer);
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = null;
      ws.onmessage = null;
      try { ws.close(1000); } catch { /* not open yet */ }
    }
    this.failPending(new RtlabError('closed', 'connection closed'));
  }
}

// ---- STOMP 1.2 over WebSocket (/api/stomp) -------------------------------------------------

const stompEscape = (v) => String(v).replace(/\\/g, '\\\\').replace(/\r/g, '\\r').replace(/\n/g, '\\n').replace(/:/g, '\\c');
const stompUnescape = (v) => v.replace(/\\(.)/g, (_, ch) => ({ n: '\n', r: '\r', c: ':', '\\': '\\' }[ch] ?? ch));

function stompFrame(command, headers, body = '') {
  let s = command + '\n';
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || v === null || v === '') continue;
    s += command === 'CONNECT' ? `${k}:${v}\n` : `${stompEscape(k)}:${stompEscape(v)}\n`;
  }
  return s + '\n' + body + '\0';
}

// parseStomp takes the frames out of buf: {frames, rest}.
function parseStomp(buf) {
  const frames = [];
  for (;;) {
    buf = buf.replace(/^[\r\n]+/, '');
    const end = buf.indexOf('\0');
    if (end < 0) return { frames, rest: buf };
    const raw = buf.slice(0, end);
    buf = buf.slice(end + 1);
    const sep = raw.search(/\r?\n\r?\n/);
    const head = (sep < 0 ? raw : raw.slice(0, sep)).split(/\r?\n/);
    const body = sep < 0 ? '' : raw.slice(sep).replace(/^\r?\n\r?\n/, '');
    const headers = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i < 0) continue;
      const k = stompUnescape(line.slice(0, i));
      if (!(k in headers)) headers[k] = stompUnescape(line.slice(i + 1));
    }
    frames.push({ command: head[0], headers, body });
  }
}

class StompTransport {
  constructor(c, name) {
    this.c = c;
    this.name = name;
    this.ws = null;
    this.buf = '';
    this.n = 0;
    this.bySub = new Map(); // subscription id → Subscription
    this.byTopic = new Map(); // topic → subscription id
    this.receipts = new Map(); // receipt → fn(frame | Error)
    this.bye = null;
  }

  _dial(onFrame, onClose) {
    const ws = new this.c.WebSocket(this.c._url('/api/stomp', {}, 'ws'), ['v12.stomp']);
    // heart-beat: ours every 10 s at most, and the server's often enough that maxSilence
    // holds three of them.
    ws.onopen = () => ws.send(stompFrame('CONNECT', {
      'accept-version': '1.2', host: new URL(this.c.base).hostname, 'heart-beat': `10000,${Math.round(this.c.silence / 3)}`, passcode: this.c.token,
    }));
    ws.onmessage = (e) => {
      this.c._heard(this);
      const { frames, rest } = parseStomp(this.buf + (typeof e.data === 'string' ? e.data : String(e.data)));
      this.buf = rest;
      for (const f of frames) onFrame(f);
    };
    ws.onclose = (e) => onClose(e);
    ws.onerror = () => {};
    return ws;
  }

  open() {
    this.ws = this._dial((f) => this.handle(f), (e) => {
      clearInterval(this.beat);
      this.failReceipts(new RtlabError('closed', 'connection closed'));
      const why = this.bye ? this.bye.reason : `closed (${e.code}${e.reason ? ' ' + e.reason : ''})`;
      this.c._down(this, new RtlabError(this.bye?.code || 'closed', why), this.bye);
    });
  }

  probe() {
    return new Promise((resolve) => {
      const done = (ok) => { clearTimeout(this.probeTimer); resolve(ok); };
      this.ws = this._dial((f) => { if (f.command === 'CONNECTED') done(true); }, () => done(false));
      this.probeTimer = setTimeout(() => done(false), this.c.opts.connectTimeout);
    });
  }

  send(command, headers, body) {
    if (this.ws?.readyState !== WS_OPEN) return false;
    this.ws.send(stompFrame(command, headers, body));
    return true;
  }

  handle(f) {
    const c = this.c;
    if (c.t !== this) return;
    const h = f.headers;
    switch (f.command) {
      case 'CONNECTED':
        // The server drops a client silent for twice the agreed interval: beat well within it.
        this.beat = setInterval(() => { if (this.ws?.readyState === WS_OPEN) this.ws.send('\n'); }, 8000);
        this.ready = true;
        for (const s of c.subs.values()) this.add(s);
        c._live(this);
        break;
      case 'MESSAGE': {
        const sub = this.bySub.get(h.subscription);
        if (!sub) break;
        if (h.refused) {
          // The server refused this subscription alone and keeps the session (docs/protocol.md).
          this.bySub.delete(h.subscription);
          this.byTopic.delete(sub.topic);
          sub._refused(h.refused, h.message || h.refused);
        } else if (h.gap === 'true') sub._gap(JSON.parse(f.body));
        else if (h.presence) {
          const d = JSON.parse(f.body);
          if (h.presence === 'presence') sub._presence(d.clients || []);
          else if (h.presence === 'join') sub._join(d.info);
          else if (h.presence === 'leave') sub._leave(d.info);
        } else {
          let data;
          try { data = JSON.parse(f.body); } catch { data = f.body; }
          const p = { topic: sub.topic, offset: Number(h.offset), epoch: h.epoch, time: h.time, data };
          if (h.sender) p.sender = h.sender;
          if (h.type) p.type = h.type;
          c._heard(this, true);
          sub._deliver(p);
        }
        break;
      }
      case 'RECEIPT': {
        const fn = this.receipts.get(h['receipt-id']);
        this.receipts.delete(h['receipt-id']);
        fn?.(f);
        break;
      }
      case 'ERROR': {
        const msg = h.message || 'ERROR frame';
        const code = /^([a-z_]+)[:]/.exec(msg)?.[1] || 'stomp_error';
        const fn = this.receipts.get(h['receipt-id']);
        if (fn) {
          this.receipts.delete(h['receipt-id']);
          fn(new RtlabError(code, msg));
        }
        // The server closes the session after an ERROR. It says whether to come back when it
        // closes on its own account (reconnect header); a refused request is no reason to stop.
        this.bye = { code, reason: msg.replace(/^[a-z_]+: /, ''), reconnect: h.reconnect === undefined || h.reconnect === 'true' };
        break;
      }
    }
  }

  // receipt sends a frame with a receipt and resolves to the RECEIPT frame.
  receipt(command, headers, body) {
    const id = `r-${++this.n}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.receipts.delete(id); reject(new RtlabError('timeout', `no RECEIPT for ${command} within 10 s`)); }, 10000);
      this.receipts.set(id, (f) => { clearTimeout(timer); if (f instanceof Error) reject(f); else resolve(f); });
      if (!this.send(command, { ...headers, receipt: id }, body)) this.receipts.get(id)(new RtlabError('closed', 'not connected'));
    });
  }

  add(sub) {
    if (!this.ready) return; // CONNECTED subscribes every subscription
    const id = `sub-${++this.n}`;
    this.bySub.set(id, sub);
    this.byTopic.set(sub.topic, id);
    const headers = { id, destination: '/topic/' + sub.topic, ack: 'auto' };
    if (sub.position) Object.assign(headers, { since: String(sub.position.offset), epoch: sub.position.epoch });
    if (sub.wantsPresence) headers.presence = 'true';
    this.receipt('SUBSCRIBE', headers).then((f) => {
      if (f.headers.refused) return; // told by the refusal's MESSAGE
      if (f.headers.offset !== undefined) sub._advance(Number(f.headers.offset), f.headers.epoch, true);
      sub._state('subscribed');
    }, (err) => sub._refused(err.code, err.message));
  }

  remove(sub) {
    const id = this.byTopic.get(sub.topic);
    this.byTopic.delete(sub.topic);
    this.bySub.delete(id);
    if (id && !sub.refused) this.send('UNSUBSCRIBE', { id });
  }

  async publish(topic, data, type, idem) {
    const f = await this.receipt('SEND', { destination: '/topic/' + topic, 'content-type': 'application/json', type, 'idempotency-key': idem }, JSON.stringify(data));
    if (f.headers.refused) throw new RtlabError(f.headers.refused, f.headers.message);
    const ans = { topic, offset: Number(f.headers.offset), epoch: f.headers.epoch };
    if (f.headers.duplicate === 'true') ans.duplicate = true;
    return ans;
  }

  // refresh: SEND to /rtlab/refresh with the new token as passcode; RECEIPT on success.
  refresh(token) { return this.receipt('SEND', { destination: '/rtlab/refresh', passcode: token }, ''); }

  failReceipts(err) {
    for (const fn of [...this.receipts.values()]) fn(err);
    this.receipts.clear();
  }

  close() {
    clearInterval(this.beat);
    clearTimeout(this.probeTimer);
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = null;
      ws.onmessage = null;
      try {
        if (ws.readyState === WS_OPEN) ws.send(stompFrame('DISCONNECT', {}));
        ws.close(1000);
      } catch { /* not open yet */ }
    }
    this.failReceipts(new RtlabError('closed', 'connection closed'));
  }
}

// ---- Server-Sent Events (POST /api/sse), publishing over HTTP --------------------------------

// The stream is read with fetch, not EventSource: the topics and positions go in a POST body
// (no URL to outgrow), and the server's comments (": connected", ": ping") are seen, so a
// stream counts as up only once the server's first bytes arrive through whatever proxy is in
// between, and one that falls silent is noticed.
class SSETransport {
  constructor(c, name) {
    this.c = c;
    this.name = name;
    this.ctl = new AbortController();
    this.req = null; // the open stream's {ctl, unlink}
    this.bye = null;
  }

  open() {
    const c = this.c;
    if (!c.subs.size) {
      c._live(this); // nothing to stream until a subscription comes
      return;
    }
    const subs = [...c.subs.values()];
    const req = linked(this.ctl.signal);
    this.req = req;
    this.bye = null;
    const body = {
      topics: subs.map((s) => ({ topic: s.topic, ...c._since(s) })),
      presence: subs.some((s) => s.wantsPresence),
    };
    const headers = c._headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' });
    c.fetch(c._url('/api/sse'), { method: 'POST', headers, body: JSON.stringify(body), cache: 'no-store', signal: req.ctl.signal })
      .then((res) => this.read(res, subs, req))
      .catch((e) => {
        if (this.req !== req || c.t !== this) return;
        c._down(this, e instanceof RtlabError ? e : new RtlabError('network', `sse: ${e.message}`), this.bye);
      })
      .finally(() => req.unlink());
  }

  async read(res, subs, req) {
    const c = this.c;
    if (!res.ok) {
      const data = await res.json().catch(() => ({}));
      const err = new RtlabError(data.error || 'http', data.reason || `sse: HTTP ${res.status}`, res.status);
      if (subs.length === 1 && res.status >= 400 && res.status < 500 && ![401, 408, 429].includes(res.status)) {
        subs[0]._refused(err.code, err.message); // the stream's only topic is refused
        if (this.req === req && c.t === this) this.open();
        return;
      }
      throw err;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let ev = { event: 'message', data: '' };
    let first = true;
    for (;;) {
      const { value, done } = await reader.read();
      if (this.req !== req || c.t !== this) return reader.cancel().catch(() => {});
      if (done) break;
      if (first) {
        first = false; // the server's first bytes came through
        c._live(this);
        for (const s of subs) s._state('subscribed');
      }
      c._heard(this);
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (ev.data) this.dispatch(ev.event, ev.data.slice(0, -1));
          ev = { event: 'message', data: '' };
          continue;
        }
        if (line.startsWith(':')) continue; // a comment: heard, nothing more
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') ev.event = v;
        else if (field === 'data') ev.data += v + '\n';
      }
    }
    const why = this.bye ? `${this.bye.code}: ${this.bye.reason}` : 'stream ended';
    throw new RtlabError(this.bye?.code || 'closed', why);
  }

  dispatch(event, data) {
    const c = this.c;
    let d;
    try { d = JSON.parse(data); } catch { return; }
    const sub = d && typeof d === 'object' ? c.subs.get(d.topic) : undefined;
    switch (event) {
      case 'message': c._heard(this, true); sub?._deliver(d); break;
      case 'subscribed': sub?._advance(d.offset, d.epoch, true); break;
      case 'gap': sub?._gap(d); break;
      case 'presence': sub?._presence(d.clients || []); break;
      case 'join': sub?._join(d.info); break;
      case 'leave': sub?._leave(d.info); break;
      case 'refused': sub?._refused(d.code || 'refused', d.reason); break;
      case 'disconnect': this.bye = d; break;
    }
  }

  // probe opens a stream of one topic and resolves whether the server's first bytes come.
  probe() {
    const c = this.c;
    const first = [...c.subs.values()][0];
    if (!first) return Promise.resolve(false);
    const headers = c._headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' });
    const timer = setTimeout(() => this.ctl.abort(), c.opts.connectTimeout);
    return c.fetch(c._url('/api/sse'), { method: 'POST', headers, body: JSON.stringify({ topics: [{ topic: first.topic }] }), signal: this.ctl.signal })
      .then(async (res) => res.ok && !(await res.body.getReader().read()).done)
      .catch(() => false)
      .finally(() => { clearTimeout(timer); this.ctl.abort(); });
  }

  // A stream's topics are fixed: adding or dropping some reopens it once, resuming the others.
  add() { this.reopen(); }

  remove() { this.reopen(); }

  reopen() {
    if (this.c.t !== this || this.reopening) return;
    this.reopening = true;
    queueMicrotask(() => {
      this.reopening = false;
      if (this.c.t !== this) return;
      this.req?.ctl.abort();
      this.req = null;
      this.open();
    });
  }

  close() {
    this.ctl.abort();
    this.req = null;
  }
}

// ---- long and short polling (POST /api/poll, every topic in one request) -------------------

class PollTransport {
  constructor(c, name) {
    this.c = c;
    this.name = name;
    this.long = name === 'longpoll';
    this.ctl = new AbortController();
    this.req = null; // the request in flight: {ctl, unlink}
    this.presence = new Map(); // topic → AbortController of its presence loop
  }

  open() {
    this.run();
    for (const s of this.c.subs.values()) this.watchPresence(s);
  }

  // add: the next request carries the new topic; a long poll that is waiting is cut short so
  // that it comes now. A burst of subscribes cuts it once.
  add(sub) {
    this.watchPresence(sub);
    if (this.waking) return;
    this.waking = true;
    queueMicrotask(() => {
      this.waking = false;
      if (this.waiting) this.req?.ctl.abort();
      this.idle?.();
    });
  }

  remove(sub) {
    this.presence.get(sub.topic)?.abort();
    this.presence.delete(sub.topic);
  }

  async run() {
    const c = this.c;
    const o = c.opts;
    const wait = Math.max(0.5, Math.min(o.longPollWait, c.silence / 2000));
    let catchUp = true; // the first request answers at once: it proves the server is there
    while (!this.ctl.signal.aborted && c.t === this) {
      const subs = [...c.subs.values()];
      if (!subs.length) {
        c._live(this);
        await new Promise((resolve) => { this.idle = resolve; }); // until add or close
        this.idle = null;
        continue;
      }
      const body = { topics: subs.map((s) => ({ topic: s.topic, ...c._since(s) })) };
      this.waiting = this.long && !catchUp;
      if (this.waiting) body.wait = wait;
      const req = linked(this.ctl.signal);
      this.req = req;
      let ans;
      try {
        ans = await c._http('POST', '/api/poll', {}, body, req.ctl.signal, (this.waiting ? wait * 1000 : 0) + c.silence / 2);
      } catch (e) {
        if (this.ctl.signal.aborted || c.t !== this) return;
        if (req.ctl.signal.aborted && e?.code !== 'timeout') continue; // cut short by add
        if (e.status === 429) {
          // The server is busy with this address: wait as it asks, keep the transport.
          await sleep(Math.max(e.retryAfter, c._backoff()), this.ctl.signal);
          continue;
        }
        c._down(this, e, e.status === 401 ? { code: e.code, reason: e.message, reconnect: true } : null);
        return;
      } finally {
        this.waiting = false;
        this.req = null;
        req.unlink();
      }
      if (this.ctl.signal.aborted || c.t !== this) return;
      if (ans.disconnect) {
        c._down(this, new RtlabError(ans.disconnect.code, ans.disconnect.reason), ans.disconnect);
        return;
      }
      c._heard(this, ans.topics.some((r) => r.publications?.length));
      catchUp = false;
      for (const r of ans.topics) {
        const s = c.subs.get(r.topic);
        if (!s) continue;
        if (r.error) {
          s._refused(r.error, r.reason); // this topic alone; the others go on
          continue;
        }
        if (r.recovered === false) s._gap({ epoch: r.epoch, reason: r.reason });
        for (const p of r.publications) s._deliver(p);
        if (!r.publications.length) s._advance(r.offset, r.epoch);
        catchUp ||= r.publications.length >= 100;
      }
      for (const s of subs) if (c.subs.get(s.topic) === s && s.position) s._state('subscribed');
      c._live(this);
      if (!this.long && !catchUp) {
        await sleep(o.pollInterval, this.ctl.signal);
        c._heard(this); // a pause of ours is no silence of the server's
      }
    }
  }

  watchPresence(sub) {
    if (!sub.wantsPresence || this.presence.has(sub.topic)) return;
    const ctl = linked(this.ctl.signal);
    this.presence.set(sub.topic, ctl.ctl);
    this.presenceLoop(sub, ctl.ctl.signal).finally(ctl.unlink);
  }

  async presenceLoop(sub, signal) {
    const c = this.c;
    while (!signal.aborted && c.t === this) {
      try {
        const r = await c._http('GET', `/api/topics/${sub.topic}/presence`, {}, undefined, signal, c.silence);
        if (!signal.aborted && c.t === this) sub._presence(r.clients || []);
      } catch { /* the poll loop notices a server that is gone */ }
      await sleep(c.opts.presenceInterval, signal);
    }
  }

  probe() { return Promise.resolve(true); }

  close() {
    this.ctl.abort();
    this.idle?.();
  }
}

module.exports = { RtlabError, Subscription, Client };
