// The seed SSE location script: GET /location/sse/connect?group=G with Accept:
// text/event-stream (k6 waits for the whole response, so the stream must end: the server's
// --seed-sse-timeout, SSE_TIMEOUT_S here), sharing a position with POST /location/sse/share
// every 3 s meanwhile. Each body must be complete (status 200, a retry: line last) and hold
// the user's own positions and, at the peak, other members'. Reconnecting with Last-Event-ID,
// as an EventSource does, must lose nothing: offsets run on from stream to stream.
import http from 'k6/http';
import { check } from 'k6';
import { BASE, Offsets, checkPeak, delivered, group, me, ordered, parseJSON, position, received, thresholds, users } from './lib.js';

const TIMEOUT_S = parseInt(__ENV.SSE_TIMEOUT_S || '30', 10); // the server's --seed-sse-timeout
let seq = 0; // this user's shares so far
let lastId = ''; // the last event id this user read, for Last-Event-ID
const offsets = new Offsets(); // across the user's streams
let pending = {}; // this user's shares not read back yet: offset → seq

export const options = { scenarios: { users: users('user') }, thresholds };

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export async function user() {
  const g = group();
  const headers = { Accept: 'text/event-stream' };
  if (lastId !== '') {
    headers['Last-Event-ID'] = lastId;
  }
  const start = Date.now();
  const stream = http.asyncRequest('GET', `${BASE}/location/sse/connect?group=${g}`, null, { headers });
  const resumed = lastId !== '';
  for (let at = 1500; at < TIMEOUT_S * 1000 - 1500; at += 3000) {
    await pause(start + at - Date.now());
    seq++;
    const r = http.post(`${BASE}/location/sse/share?group=${g}`, position(seq), { headers: { 'Content-Type': 'application/json' } });
    if (check(r, { 'share: status 200': (x) => x.status === 200 })) {
      pending[r.json('offset')] = seq;
    }
  }
  const res = await stream;
  check(res, { 'SSE Connection Status is 200': (r) => r.status === 200 });
  const lines = (res.body || '').split('\n').filter((l) => l !== '');
  check(lines, { 'SSE: the stream ended with a retry: line': (l) => l.length > 0 && l[l.length - 1].startsWith('retry:') });
  let others = 0;
  let first = 0; // the first offset this stream carried
  let offset = 0;
  for (const line of lines) {
    if (line.startsWith('id: ')) {
      lastId = line.slice(4);
      offset = parseInt(lastId.slice(lastId.lastIndexOf('=') + 1), 10); // location/G=OFFSET:EPOCH
      offsets.see(offset);
      first = first || offset;
    } else if (line.startsWith('event: ')) {
      ordered.add(false, { what: line }); // a gap or a refusal
    } else if (line.startsWith('data: ')) {
      const p = parseJSON(line.slice(6)) || {};
      received.add(1);
      if (p.userId !== me()) {
        others++;
      } else if (pending[offset] !== undefined) {
        delivered.add(pending[offset] === p.seq, { what: 'own position' });
        delete pending[offset];
      }
    }
  }
  // A share this stream should have carried and did not is lost. One published after the
  // stream ended comes with the next (it resumes); one published before a first stream had
  // started (a slow connect) was never this user's to receive.
  const kept = {};
  for (const [o, s] of Object.entries(pending)) {
    const at = parseInt(o, 10);
    if (at > offset) {
      kept[o] = s;
    } else if (resumed || at >= first) {
      delivered.add(false, { what: 'own position' });
    }
  }
  pending = kept;
  checkPeak(start, Date.now(), others > 0);
}
