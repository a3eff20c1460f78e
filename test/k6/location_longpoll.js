// The seed long-polling location script: share with POST /location/long/{g}/notify, then wait
// for the group's next positions with GET /location/long/{g}; again 3 s later. Each answer
// must hold other members' positions, each member's in order; at the peak it must not be empty.
// (This route delivers what is published while a poll waits, so members' seqs may skip.)
import http from 'k6/http';
import { check, sleep } from 'k6';
import { BASE, SenderSeqs, checkPeak, group, position, thresholds, users } from './lib.js';

let seq = 0; // this user's shares so far
const seqs = new SenderSeqs(); // kept across polls

export const options = { scenarios: { users: users('user') }, thresholds };

export function user() {
  const g = group();
  seq++;
  const share = http.post(`${BASE}/location/long/${g}/notify`, position(seq), { headers: { 'Content-Type': 'application/json' } });
  check(share, { 'notify: status 200': (r) => r.status === 200 });
  const start = Date.now();
  const res = http.get(`${BASE}/location/long/${g}`);
  const ok = check(res, { 'long poll: status 200 with a list': (r) => r.status === 200 && Array.isArray(r.json()) });
  const before = seqs.others;
  if (ok) {
    for (const p of res.json()) {
      seqs.see(p, false);
    }
  }
  checkPeak(start, start + 3000, seqs.others > before);
  sleep(3);
}
