// Shared by the exported scripts: who each virtual user is, when it publishes, and how its
// receipts are counted. The workload itself is in config.js, written by rtlab bench --export-k6.
import exec from 'k6/execution';
import http from 'k6/http';
import { Counter, Rate, Trend } from 'k6/metrics';
import { setTimeout, clearTimeout } from 'k6/timers';
import crypto from 'k6/crypto';
import encoding from 'k6/encoding';
import { W } from './config.js';

// Metrics. delivery_latency is from the publication's intended send time to its receipt, over
// exactly the receipts deliveries_received counts; delivered is received ÷ expected.
export const latency = new Trend('delivery_latency', true);
export const received = new Counter('deliveries_received');
export const expected = new Counter('deliveries_expected');
export const lost = new Counter('deliveries_lost');
export const duplicates = new Counter('deliveries_duplicate');
export const outside = new Counter('deliveries_outside_window');
export const delivered = new Rate('delivered');
export const published = new Counter('publications_sent');
export const pubFailed = new Counter('publications_failed');
export const errors = new Counter('protocol_errors');

// Several hosts without execution segments: -e INSTANCES=n -e INSTANCE=i gives host i the
// users of every n-th group, so no group is split across hosts and no clock sync is needed.
const INSTANCES = Number(__ENV.INSTANCES || 1);
const INSTANCE = Number(__ENV.INSTANCE || 0);
export const BASE = (__ENV.BASE || 'http://127.0.0.1:8080').replace(/\/$/, '');
export const WS_BASE = BASE.replace(/^http/, 'ws');

// ids lists the users this instance runs, in the order they join.
const ids = [];
for (let id = 0; id < W.peak; id++) {
  if ((id % W.groups) % INSTANCES === INSTANCE) ids.push(id);
}
// share is how many of the first n users are this instance's.
function share(n) {
  let k = 0;
  while (k < ids.length && ids[k] < n) k++;
  return k;
}

export function options(extraThresholds) {
  return {
    scenarios: {
      users: {
        executor: 'ramping-vus',
        startVUs: 0,
        stages: W.stages.map((s) => ({ duration: s.duration, target: INSTANCES > 1 ? share(s.target) : s.target })),
        gracefulRampDown: '0s',
        gracefulStop: '0s',
      },
    },
    thresholds: Object.assign({
      delivered: ['rate>=0.999'],
      delivery_latency: ['p(99)<' + (__ENV.P99_MS || 1000)],
    }, extraThresholds || {}),
    discardResponseBodies: false,
  };
}

// user is the virtual user this VU plays: the bench's user id, its group and topic, its phase.
export function user() {
  let id;
  if (INSTANCES > 1) {
    id = ids[(exec.vu.idInInstance - 1) % ids.length];
  } else {
    id = (exec.vu.idInTest - 1) % W.peak;
  }
  const group = id % W.groups;
  const u = { id, group, topic: 'location/' + group, phase: W.phasesMs[id], token: '' };
  if (__ENV.AUTH_SECRET) u.token = mintToken(__ENV.AUTH_SECRET, 'k6-u' + id);
  return u;
}

// mintToken signs an HS256 token as the bench does with --auth-secret.
function mintToken(secret, sub) {
  const now = Math.floor(Date.now() / 1000);
  const head = encoding.b64encode(JSON.stringify({ alg: 'HS256', typ: 'JWT' }), 'rawurl');
  const claims = encoding.b64encode(JSON.stringify({ sub, iat: now, exp: now + 86400 }), 'rawurl');
  const sig = crypto.hmac('sha256', secret, head + '.' + claims, 'base64rawurl');
  return head + '.' + claims + '.' + sig;
}

// now is the receipt time in ms: k6's clock has millisecond resolution, so a receipt is put in
// the middle of its millisecond (publications are sent on whole milliseconds).
export function now() {
  return Date.now() + 0.5;
}

// publisher sends u's position at its phase every interval from the start of the scenario, as
// the bench's users do; send(seq, body, at) writes one (at: its intended send time in ms). A late
// timer sends late, never skips: the wait is in the latency, as in the bench. The returned
// function stops it.
export function publisher(u, send) {
  const t0 = exec.scenario.startTime;
  let last = -1;
  let timer = null;
  const next = () => {
    const seq = last >= 0 ? last + 1 : Math.max(0, Math.ceil((Date.now() - t0 - u.phase) / W.intervalMs));
    const at = t0 + seq * W.intervalMs + u.phase;
    timer = setTimeout(() => {
      last = seq;
      // The intended send time in Unix ns, as the bench writes it; latency counts from it.
      const x = ((u.id * 7919 + seq * 104729) % 10000) / 100;
      send(seq, `{"x":${x.toFixed(2)},"y":${(100 - x).toFixed(2)},"vu":${u.id},"seq":${seq},"ts":${at}000000}`, at);
      published.add(1);
      next();
    }, Math.max(0, at - Date.now()));
  };
  next();
  return () => clearTimeout(timer);
}

// Receiver counts what one user receives as the bench does: a receipt counts once the user has
// stayed W.graceMs after the publication (a user that leaves earlier was not expected to get
// it), publications sent before its subscription was confirmed are outside its window, and
// each sender's sequence numbers tell duplicates and the publications lost in between.
export class Receiver {
  constructor() {
    this.from = 0;
    this.pending = [];
    this.last = new Map();
    this.timer = null;
    this.due = 0;
  }

  open() {
    if (!this.from) this.from = Date.now();
  }

  close() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  // wake flushes when the oldest pending receipt's grace is over: exactly then, so a receipt
  // counts if and only if its receiver was still there, as in the bench.
  wake(ts) {
    const due = ts + W.graceMs;
    if (this.timer && this.due <= due) return;
    if (this.timer) clearTimeout(this.timer);
    this.due = due;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, Math.max(0, due - Date.now()));
  }

  receive(data, at) {
    if (!data || data.vu === undefined || data.ts === undefined) {
      errors.add(1);
      return;
    }
    const ts = Number(data.ts) / 1e6;
    if (!this.from || ts < this.from) {
      outside.add(1);
      return;
    }
    this.pending.push({ vu: data.vu, seq: data.seq, ts, lat: at - ts });
    this.wake(ts);
  }

  flush() {
    const until = Date.now() - W.graceMs;
    const ready = this.pending.filter((r) => r.ts <= until).sort((a, b) => a.ts - b.ts);
    this.pending = this.pending.filter((r) => r.ts > until);
    if (this.pending.length > 0) this.wake(Math.min(...this.pending.map((r) => r.ts)));
    for (const r of ready) {
      const last = this.last.get(r.vu);
      if (last !== undefined && r.seq <= last) {
        duplicates.add(1);
        continue;
      }
      if (last !== undefined && r.seq > last + 1) {
        const n = r.seq - last - 1;
        lost.add(n);
        expected.add(n);
        for (let i = 0; i < n; i++) delivered.add(false);
      }
      this.last.set(r.vu, r.seq);
      expected.add(1); // first: an iteration interrupted in between never has received > expected
      received.add(1);
      delivered.add(true);
      latency.add(r.lat);
    }
  }
}

// pollUser is a location user over polling: long polls (wait=) when long, else a short poll
// every interval.
export async function pollUser(LONG) {
  const u = user();
  const rx = new Receiver();
  const params = { headers: u.token ? { Authorization: 'Bearer ' + u.token } : {}, timeout: '60s' };
  let since = null;
  let epoch = '';
  for (;;) {
    const q = since === null ? '' : `?since=${since}&limit=1000` + (epoch ? '&epoch=' + epoch : '') + (LONG ? `&wait=${W.longWaitMs}ms` : '');
    const started = Date.now();
    const res = await http.asyncRequest('GET', `${BASE}/api/poll/${u.topic}${q}`, null, params);
    const at = now();
    if (res.status !== 200) {
      errors.add(1);
      await sleep(1000);
      continue;
    }
    const m = res.json();
    if (since === null) {
      rx.open();
      publisher(u, (seq, body) => {
        http.asyncRequest('POST', `${BASE}/api/publish/${u.topic}`, body, params).then((r) => {
          if (r.status !== 200) pubFailed.add(1);
        });
      });
      since = m.offset;
    } else {
      for (const p of m.publications || []) {
        rx.receive(p.data, at);
        since = Math.max(since, p.offset);
      }
    }
    epoch = m.epoch || '';
    if (!LONG && (m.publications || []).length < 1000) await sleep(W.intervalMs - (Date.now() - started));
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
