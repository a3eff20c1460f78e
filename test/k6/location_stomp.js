// The seed STOMP location script: CONNECT to /location, SUBSCRIBE /sub/location/G, SEND a
// position to /pub/share/G every 3 s. Every member must receive the group's publications while
// it is there, by consecutive offset, and each member's positions in sequence.
import ws from 'k6/ws';
import { check } from 'k6';
import {
  Offsets, SenderSeqs, closeWhen, WS, checkPeak, delivered, group, me, parseJSON, position, stompFrame,
  stompFrames, thresholds, users,
} from './lib.js';

const SHARES = 3; // positions a user shares per connection, one every 3 s
let seq = 0; // this user's shares so far, across connections

export const options = { scenarios: { users: users('user') }, thresholds };

export function user() {
  const g = group();
  const seqs = new SenderSeqs();
  const offsets = new Offsets();
  const mine = [];
  const own = {};
  let connected = false;
  let error = '';
  const start = Date.now();
  const res = ws.connect(`${WS}/location`, null, (socket) => {
    socket.on('open', () => {
      socket.setTimeout(() => socket.close(), 30000); // never hang
      socket.send(stompFrame('CONNECT', { 'accept-version': '1.2', 'heart-beat': '10000,10000' }));
    });
    socket.on('message', (data) => {
      for (const f of stompFrames(data)) {
        if (f.command === 'CONNECTED') {
          connected = true;
          socket.send(stompFrame('SUBSCRIBE', { destination: `/sub/location/${g}`, id: `sub-${g}` }));
          const share = () => {
            seq++;
            mine.push(seq);
            socket.send(stompFrame('SEND', { destination: `/pub/share/${g}`, 'content-type': 'application/json' }, position(seq)));
            if (mine.length === SHARES) { // the last: leave once it came back
              closeWhen(socket, () => own[seq] === true, 10000);
            } else {
              socket.setTimeout(share, 3000);
            }
          };
          share();
        } else if (f.command === 'MESSAGE') {
          offsets.see(parseInt(f.headers.offset, 10));
          const p = parseJSON(f.body);
          seqs.see(p, true);
          if (p && p.userId === me()) {
            own[p.seq] = true;
          }
        } else if (f.command === 'ERROR') {
          error = f.headers.message || 'ERROR';
          socket.close();
        }
      }
    });
  });
  check(res, { 'STOMP: WebSocket upgraded': (r) => r && r.status === 101 });
  check(null, { 'STOMP: CONNECTED': () => connected, 'STOMP: no ERROR': () => error === '' });
  for (const s of mine) {
    delivered.add(own[s] === true, { what: 'own position' });
  }
  checkPeak(start, Date.now(), seqs.others > 0);
}
