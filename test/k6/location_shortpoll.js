// The seed short-polling location script: every 3 s a user shares its position and reads the
// group's state with GET /cur/{g}. The state must show the user's own latest position at once
// and every member's positions in order; at the peak, other members too.
import http from 'k6/http';
import { check, sleep } from 'k6';
import {
  BASE, checkPeak, delivered, group, me, ordered, position, received, thresholds, users,
} from './lib.js';

let seq = 0; // this user's shares so far
const seen = {}; // the latest seq this user saw of each member

export const options = { scenarios: { users: users('user') }, thresholds };

export function user() {
  const g = group();
  const start = Date.now();
  seq++;
  const share = http.post(`${BASE}/location/sse/share?group=${g}`, position(seq), { headers: { 'Content-Type': 'application/json' } });
  check(share, { 'share: status 200': (r) => r.status === 200 });
  // The state follows publications a moment behind: read it until it has caught up with the
  // share (by offset), as a user polling again would.
  const at = share.status === 200 ? share.json('offset') : 0;
  let res;
  for (let tries = 0; ; tries++) {
    res = http.get(`${BASE}/cur/${g}`);
    if (res.status !== 200 || res.json('offset') >= at || tries === 50) {
      break;
    }
    sleep(0.1);
  }
  const ok = check(res, { 'GET /cur: status 200': (r) => r.status === 200 });
  let others = 0;
  let mine = false;
  if (ok) {
    for (const m of res.json('members') || []) {
      const d = m.data || {};
      received.add(1);
      if (d.userId === me()) {
        mine = d.seq === seq;
      } else if (typeof d.seq === 'number') {
        others++;
        if (seen[d.userId] !== undefined) {
          ordered.add(d.seq >= seen[d.userId], { what: 'member state' });
        }
        seen[d.userId] = d.seq;
      }
    }
  }
  delivered.add(mine, { what: 'own position in the state' });
  checkPeak(start, start + 3000, others > 0);
  sleep(3);
}
