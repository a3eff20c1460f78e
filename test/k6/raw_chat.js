// The seed raw WebSocket chat script: its first and only message on /chat, with a roomId and
// no ENTER before it. Every member must receive the room's messages: each user checks its own
// window, an observer the whole run against the room's history.
import http from 'k6/http';
import ws from 'k6/ws';
import { check, sleep } from 'k6';
import {
  BASE, STAY_MS, WS, chatOptions, checkPeak, closeWhen, delivered, observerEndAt, ordered, parseJSON, received,
} from './lib.js';

const seedMessage = JSON.stringify({ type: 'CHAT', sender: 'won11111', message: 'Hello', roomId: 8, createdAt: '10:00:00' });

export const options = chatOptions;

let told = false; // this user logged its refusal

export function user() {
  const st = { error: '', talks: 0, sentAt: 0 };
  const res = ws.connect(`${WS}/chat`, null, (socket) => {
    socket.on('open', () => {
      socket.setTimeout(() => socket.close(), 30000); // never hang
      socket.send(seedMessage);
      st.sentAt = Date.now();
      socket.setTimeout(() => closeWhen(socket, () => st.talks >= 1, 10000), STAY_MS);
    });
    socket.on('message', (data) => {
      received.add(1);
      const m = parseJSON(data) || {};
      if (m.op === 'error') {
        st.error = m.reason;
        socket.close();
      } else if (m.type === 'CHAT' && m.message === 'Hello') {
        st.talks++;
      }
    });
  });
  check(res, { 'chat: WebSocket upgraded': (r) => r && r.status === 101 });
  check(st, { 'chat: no error': (s) => s.error === '' });
  if (st.error !== '') {
    if (!told) {
      console.error(`chat error: ${st.error}`);
      told = true;
    }
    sleep(1); // a refused user retries gently
  }
  delivered.add(st.talks >= 1, { what: 'own message' });
  checkPeak(st.sentAt, Date.now(), st.talks >= 2);
}

// canonical re-encodes JSON with sorted keys, so that equal values compare equal.
function canonical(v) {
  const sorted = (x) => {
    if (Array.isArray(x)) {
      return x.map(sorted);
    }
    if (x && typeof x === 'object') {
      return Object.keys(x).sort().reduce((o, k) => { o[k] = sorted(x[k]); return o; }, {});
    }
    return x;
  };
  return JSON.stringify(sorted(typeof v === 'string' ? JSON.parse(v) : v));
}

// history is room 8's history, from this observer's ENTER on (its last, should the room have
// an older history).
function history() {
  const pubs = [];
  for (let since = 0; ;) {
    const page = JSON.parse(http.get(`${BASE}/api/poll/chat/8?since=${since}&limit=1000`).body).publications;
    pubs.push(...page);
    if (page.length < 1000) {
      break;
    }
    since = page[page.length - 1].offset;
  }
  let enter = -1;
  pubs.forEach((p, i) => {
    if (p.type === 'ENTER' && p.sender === 'k6-observer') {
      enter = i;
    }
  });
  return enter < 0 ? [] : pubs.slice(enter);
}

// observer joins room 8 before the first user and stays until after the last; then what it
// received, from its own ENTER on, must be the room's history up to then, message for message.
export function observer() {
  const got = [];
  let start = -1; // where in got the observer's own ENTER is
  let want = [];
  ws.connect(`${WS}/chat`, null, (socket) => {
    socket.on('open', () => {
      socket.send(JSON.stringify({ type: 'CHAT', sender: 'k6-observer', message: 'listening', roomId: 8, createdAt: '10:00:00' }));
    });
    socket.on('message', (data) => {
      if (start < 0 && (parseJSON(data) || {}).sender === 'k6-observer') {
        start = got.length;
      }
      got.push(data);
    });
    socket.setTimeout(() => { // the users are gone: wait for what the room holds by now
      want = history();
      closeWhen(socket, () => start >= 0 && got.length - start >= want.length, 10000);
    }, observerEndAt() - Date.now());
  });
  const have = start < 0 ? [] : got.slice(start, start + want.length);
  let same = have.length === want.length;
  for (let i = 0; i < have.length && same; i++) {
    same = canonical(have[i]) === canonical(want[i].data);
    if (!same) {
      console.error(`observer: message ${i} is ${have[i]}, history has ${JSON.stringify(want[i])}`);
    }
  }
  check(null, { 'observer: joined and saw the users': () => want.length > 2 });
  delivered.add(have.length === want.length, { what: 'observer: every message' });
  ordered.add(same, { what: 'observer: history order' });
  console.log(`observer: ${have.length} of ${want.length} messages of chat/8`);
}
