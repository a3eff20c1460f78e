// Shared by the scripts of a profile export: the profile's templates, paths and matches, as
// rtlab bench reads them. The profile itself is P in config.js.
import exec from 'k6/execution';
import { user as labUser, Receiver, errors } from './lib.js';
import { W, P } from './config.js';

export { P };

// user is lib.js's user with the profile's {user} and {token} (minted at export time).
export function user() {
  const u = labUser();
  u.name = P.users[u.id];
  u.token = P.tokens ? P.tokens[u.id] : '';
  return u;
}

const VARS = /\{(group|user|vu|seq|ts|ts_ms|ts_us|token|cursor)\}/g;

// render fills a template for u; at is the publication's intended send time in whole ms.
export function render(tmpl, u, seq, at, cursor) {
  if (!tmpl) return '';
  return tmpl.replace(VARS, (_, v) => {
    switch (v) {
      case 'group': return String(u.group);
      case 'user': return u.name;
      case 'vu': return String(u.id);
      case 'seq': return String(seq || 0);
      case 'ts': return at ? at + '000000' : '0'; // ns: past a double's exact integers, so as text
      case 'ts_ms': return at ? at + '.000000' : '0';
      case 'ts_us': return at ? at + '000.000' : '0';
      case 'token': return u.token;
      case 'cursor': return encodeURIComponent(cursor || '');
    }
    return '';
  });
}

// url is the route of t for u on base, with the profile's query parameters.
export function url(base, t, tmpl, u, cursor) {
  let s = base + render(tmpl, u, 0, 0, cursor);
  (t.query || []).forEach(([k, v], i) => {
    s += (i === 0 && !s.includes('?') ? '?' : '&') + encodeURIComponent(k) + '=' + encodeURIComponent(render(v, u));
  });
  return s;
}

// headers are t's headers (and extra's) and cookies for u.
export function headers(t, u, extra) {
  const h = {};
  for (const [k, v] of (t.headers || []).concat(extra || [])) h[k] = render(v, u);
  if (t.cookies && t.cookies.length) h.Cookie = t.cookies.map(([k, v]) => k + '=' + render(v, u)).join('; ');
  return h;
}

// lookup is the value at a path ($, $.a.b, $.a[0].b) in a parsed message, or undefined.
export function lookup(obj, path) {
  const re = /\.([^.[]+)|\[(\d+)\]/g;
  let v = obj;
  for (let m = re.exec(path.slice(1)); m; m = re.exec(path.slice(1))) {
    if (v === null || typeof v !== 'object') return undefined;
    v = m[1] !== undefined ? v[m[1]] : v[Number(m[2])];
  }
  return v;
}

// matches: every match holds (a value, or with present any value at all).
export function matches(ms, obj) {
  for (const m of ms || []) {
    const v = lookup(obj, m.path);
    if (v === undefined || (!m.present && String(v) !== m.value)) return false;
  }
  return true;
}

// parse is a message as JSON, or null (text for a regex read).
export function parse(text) {
  try {
    return JSON.parse(text);
  } catch (e) {
    return null;
  }
}

// fields reads a delivery's sender, number and send time (ns) where the profile reads them. A
// delivery without a send time gets its intended one, which the workload fixes.
export function fields(r, text, obj) {
  let vu, seq, ts;
  if (r.regex) {
    const m = new RegExp(r.regex).exec(text);
    if (!m) return null;
    [vu, seq, ts] = [m[r.groups.vu], m[r.groups.seq], r.groups.ts ? m[r.groups.ts] : undefined];
  } else {
    [vu, seq, ts] = [lookup(obj, r.vu), lookup(obj, r.seq), r.ts ? lookup(obj, r.ts) : undefined];
  }
  if (vu === undefined || seq === undefined) return null;
  vu = Number(vu);
  seq = Number(seq);
  ts = ts === undefined ? (exec.scenario.startTime + seq * W.intervalMs + W.phasesMs[vu]) * 1e6 : Number(ts) * r.tsUnit;
  return { vu, seq, ts };
}

// deliver hands one message (text, and obj, text parsed or null) to rx if it is a delivery.
export function deliver(t, rx, text, obj, at) {
  const r = t.read;
  if ((r.match || []).length && (obj === null || !matches(r.match, obj))) return;
  const f = fields(r, text, obj);
  if (f === null) errors.add(1);
  else rx.receive(f, at);
}

// readyBy reports whether a message (text parsed, or null) tells the subscription is in place.
export function readyBy(t, obj) {
  const rd = t.subscribe.ready;
  return rd.kind === 'message' && (!(rd.match || []).length || (obj !== null && matches(rd.match, obj)));
}

export { Receiver };
