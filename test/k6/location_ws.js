// The seed raw WebSocket location script: join /ws?group=G and send a position as a text frame
// every 3 s. Every member of the group must receive every position sent while it is there:
// its own, and each other member's in sequence.
import ws from 'k6/ws';
import { check } from 'k6';
import {
  SenderSeqs, closeWhen, WS, checkPeak, delivered, group, me, parseJSON, position, thresholds, users,
} from './lib.js';

const SHARES = 3; // positions a user shares per connection, one every 3 s
let seq = 0; // this user's shares so far, across connections

export const options = { scenarios: { users: users('user') }, thresholds };

export function user() {
  const seqs = new SenderSeqs();
  const mine = [];
  const own = {};
  let error = '';
  const start = Date.now();
  const res = ws.connect(`${WS}/ws?group=${group()}`, null, (socket) => {
    socket.on('open', () => {
      socket.setTimeout(() => socket.close(), 30000); // never hang
      const share = () => {
        seq++;
        mine.push(seq);
        socket.send(position(seq));
        if (mine.length === SHARES) { // the last: leave once it came back
          closeWhen(socket, () => own[seq] === true, 10000);
        } else {
          socket.setTimeout(share, 3000);
        }
      };
      share();
    });
    socket.on('message', (data) => {
      const p = parseJSON(data);
      if (p && p.op === 'error') {
        error = p.reason;
        socket.close();
        return;
      }
      seqs.see(p, true);
      if (p && p.userId === me()) {
        own[p.seq] = true;
      }
    });
  });
  check(res, { 'ws: WebSocket upgraded': (r) => r && r.status === 101 });
  check(error, { 'ws: no error': (e) => e === '' });
  for (const s of mine) {
    delivered.add(own[s] === true, { what: 'own position' });
  }
  checkPeak(start, Date.now(), seqs.others > 0);
}
