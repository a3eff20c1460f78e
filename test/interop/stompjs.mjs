// Drives @stomp/stompjs (the client browsers use) against an rtlab STOMP endpoint.
// usage: node stompjs.mjs ws://127.0.0.1:PORT
// Prints one line per check and exits non-zero on the first failure.
import { Client } from '@stomp/stompjs';
import WebSocket from 'ws';

const base = process.argv[2];
const fail = (msg) => { console.error('FAIL ' + msg); process.exit(1); };
setTimeout(() => fail('timed out'), 15000).unref();

function connect(path) {
  return new Promise((resolve, reject) => {
    const c = new Client({
      brokerURL: base + path,
      webSocketFactory: () => new WebSocket(base + path, ['v12.stomp', 'v11.stomp', 'v10.stomp']),
      reconnectDelay: 0,
      heartbeatIncoming: 1000,
      heartbeatOutgoing: 1000,
      onConnect: () => resolve(c),
      onStompError: (f) => reject(new Error('ERROR ' + f.headers.message)),
      onWebSocketError: (e) => reject(e),
    });
    c.activate();
  });
}

function nextMessages(c, destination, n, headers = {}) {
  return new Promise((resolve) => {
    const got = [];
    const sub = c.subscribe(destination, (m) => {
      got.push(m);
      if (got.length === n) { sub.unsubscribe(); resolve(got); }
    }, headers);
  });
}

const a = await connect('/api/stomp');
const b = await connect('/api/stomp');
console.log('ok connected, version ' + a.connectedVersion);

// Native destination: publish from b, receive on a, in order, with offsets.
const wait = nextMessages(a, '/topic/interop/1', 3);
await new Promise((r) => setTimeout(r, 100));
for (let i = 0; i < 3; i++) b.publish({ destination: '/topic/interop/1', body: JSON.stringify({ i }) });
const msgs = await wait;
msgs.forEach((m, i) => {
  if (JSON.parse(m.body).i !== i) fail('order: ' + m.body);
  if (m.headers.offset !== String(i + 1)) fail('offset header ' + m.headers.offset);
  // Header values are escaped (the time's colons as \c): stompjs gives the time back.
  if (Number.isNaN(Date.parse(m.headers.time)) || !m.headers.time.includes(':')) fail('time header ' + m.headers.time);
});
console.log('ok publish/subscribe in order with offsets');

// Resume: a new subscription with since=1 replays offsets 2 and 3.
const replay = await nextMessages(b, '/topic/interop/1', 2, { since: '1' });
if (replay.map((m) => m.headers.offset).join() !== '2,3') fail('resume ' + replay.map((m) => m.headers.offset));
console.log('ok resume with since');

// Seed endpoint and destinations.
const s = await connect('/location');
const seedWait = nextMessages(s, '/sub/location/5', 1);
await new Promise((r) => setTimeout(r, 100));
s.publish({ destination: '/pub/share/5', body: '{"x":1,"y":2}' });
const [loc] = await seedWait;
if (loc.body !== '{"x":1,"y":2}') fail('seed body ' + loc.body);
console.log('ok seed /location');

// Receipts.
await new Promise((resolve) => {
  const id = 'r-' + Date.now();
  a.watchForReceipt(id, () => resolve());
  a.publish({ destination: '/topic/interop/1', body: '{}', headers: { receipt: id } });
});
console.log('ok receipt');

// Client ack mode.
const ackWait = new Promise((resolve) => {
  const sub = b.subscribe('/topic/interop/ack', (m) => { m.ack(); sub.unsubscribe(); resolve(m); }, { ack: 'client-individual' });
});
await new Promise((r) => setTimeout(r, 100));
a.publish({ destination: '/topic/interop/ack', body: '{"ack":true}' });
await ackWait;
console.log('ok client-individual ack');

for (const c of [a, b, s]) await c.deactivate();
console.log('PASS');
process.exit(0);
