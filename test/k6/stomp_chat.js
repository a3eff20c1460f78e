// The seed STOMP chat script: CONNECT, SUBSCRIBE /sub/chat/8, SEND one message with no ENTER
// and no type, exactly as its users sent it. Every member must receive every message of the
// room while it is there, in order: each user checks its own window, an observer the whole run.
import http from 'k6/http';
import ws from 'k6/ws';
import { check, sleep } from 'k6';
import {
  BASE, Offsets, STAY_MS, WS, chatOptions, checkPeak, closeWhen, delivered, observerEndAt, ordered, received,
  stompFrame, stompFrames,
} from './lib.js';

export const options = chatOptions;

let told = false; // this user logged its refusal

export function user() {
  const st = { connected: false, error: '', talks: 0, sentAt: 0 };
  const offsets = new Offsets();
  const res = ws.connect(`${WS}/stomp/chat`, null, (socket) => {
    socket.on('open', () => {
      socket.setTimeout(() => socket.close(), 30000); // never hang
      socket.send(stompFrame('CONNECT', { 'accept-version': '1.2', 'heart-beat': '10000,10000' }));
    });
    socket.on('message', (data) => {
      for (const f of stompFrames(data)) {
        if (f.command === 'CONNECTED') {
          st.connected = true;
          socket.send(stompFrame('SUBSCRIBE', { destination: '/sub/chat/8', id: 'sub-8' }));
          socket.send(stompFrame('SEND', { destination: '/pub/chat/message/8', 'content-type': 'application/json' },
            JSON.stringify({ sender: 'won11111', message: 'Hello STOMP!' })));
          st.sentAt = Date.now();
          socket.setTimeout(() => closeWhen(socket, () => st.talks >= 1, 10000), STAY_MS);
        } else if (f.command === 'MESSAGE') {
          received.add(1);
          offsets.see(parseInt(f.headers.offset, 10));
          if (f.headers.type === 'TALK' && f.body.includes('Hello STOMP!')) {
            st.talks++;
          }
        } else if (f.command === 'ERROR') {
          st.error = f.headers.message || 'ERROR';
          socket.close();
        }
      }
    });
  });
  check(res, { 'STOMP chat: WebSocket upgraded': (r) => r && r.status === 101 });
  check(st, {
    'STOMP chat: CONNECTED': (s) => s.connected,
    'STOMP chat: no ERROR': (s) => s.error === '',
  });
  if (st.error !== '') {
    if (!told) {
      console.error(`STOMP chat ERROR: ${st.error}`);
      told = true;
    }
    sleep(1); // a refused user retries gently
  }
  delivered.add(st.talks >= 1, { what: 'own message' });
  checkPeak(st.sentAt, Date.now(), st.talks >= 2);
}

// observer listens to room 8 from before the first user until after the last, then checks it
// received every publication of that time, in order, by offset.
export function observer() {
  const endAt = observerEndAt();
  let from = -1; // the room's offset when the subscription started
  let final = -1; // the room's offset once the users were gone
  const got = [];
  ws.connect(`${WS}/stomp/chat`, null, (socket) => {
    socket.on('open', () => {
      socket.send(stompFrame('CONNECT', { 'accept-version': '1.2' }));
      socket.send(stompFrame('SUBSCRIBE', { destination: '/sub/chat/8', id: 'observer', receipt: 'subscribed' }));
    });
    socket.on('message', (data) => {
      for (const f of stompFrames(data)) {
        if (f.command === 'RECEIPT') {
          from = parseInt(f.headers.offset, 10);
        } else if (f.command === 'MESSAGE') {
          got.push(parseInt(f.headers.offset, 10));
        }
      }
    });
    socket.setTimeout(() => {
      final = http.get(`${BASE}/api/poll/chat/8`).json('offset');
      const deadline = Date.now() + 10000;
      socket.setInterval(() => {
        if ((got.length > 0 && got[got.length - 1] >= final) || Date.now() > deadline) {
          socket.close();
        }
      }, 100);
    }, endAt - Date.now());
  });
  const want = final - from;
  const upTo = got.filter((o) => o <= final);
  let inOrder = upTo.length === want;
  for (let i = 0; i < upTo.length && inOrder; i++) {
    inOrder = upTo[i] === from + 1 + i;
  }
  check(null, { 'observer: subscribed and saw the users': () => from >= 0 && want > 0 });
  delivered.add(upTo.length === want, { what: 'observer: every publication' });
  ordered.add(inOrder, { what: 'observer: offsets' });
  console.log(`observer: ${upTo.length} of ${want} publications of chat/8 (offsets ${from + 1}..${final})`);
}
