// Drives @stomp/stompjs through the Spring destinations of docs/spring.md: /queue/* broadcast,
// SUBSCRIBE to /app/... answered once, refused SENDs on /user/queue/errors, login/passcode.
// usage: node spring.mjs OPEN_WS_URL AUTH_WS_URL TOKEN (ann's token for the second server)
// Prints one line per check and PASS; exits non-zero on the first failure.
import { Client } from '@stomp/stompjs';
import WebSocket from 'ws';

const [open, authed, token] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL ' + msg); process.exit(1); };
setTimeout(() => fail('timed out'), 30000).unref();

function connect(url, connectHeaders) {
  return new Promise((resolve, reject) => {
    const c = new Client({
      webSocketFactory: () => new WebSocket(url + '/api/stomp', ['v12.stomp']),
      connectHeaders, reconnectDelay: 0,
      onConnect: (f) => resolve([c, f]),
      onStompError: (f) => reject(new Error('ERROR ' + f.headers.message)),
      onWebSocketError: (e) => reject(e),
    });
    c.activate();
  });
}

const next = (c, destination, headers = {}) => new Promise((resolve) => {
  const sub = c.subscribe(destination, (m) => { sub.unsubscribe(); resolve(m); }, headers);
});
const receipt = (c, id) => new Promise((resolve) => c.watchForReceipt(id, resolve));
const settle = () => new Promise((r) => setTimeout(r, 200));

// login:guest passcode:guest, without auth configured.
const [a] = await connect(open, { login: 'guest', passcode: 'guest' });
const [b] = await connect(open, { login: 'guest', passcode: 'guest' });
console.log('ok login/passcode guest accepted without auth');

// /queue/* broadcasts as Spring's simple broker; message-id comes back unescaped.
const got = next(a, '/queue/orders');
await settle();
b.publish({ destination: '/queue/orders', body: '{"order":1}' });
const m = await got;
if (JSON.parse(m.body).order !== 1 || m.headers.destination !== '/queue/orders') fail('queue ' + JSON.stringify(m.headers));
if (!m.headers['message-id'].includes(':')) fail('message-id ' + m.headers['message-id']);
console.log('ok /queue/orders broadcast, message-id ' + m.headers['message-id']);

// client-individual ACK by the unescaped id is accepted (an ERROR would fail the run).
const acked = new Promise((resolve) => a.subscribe('/queue/acked', resolve, { ack: 'client-individual' }));
await settle();
b.publish({ destination: '/queue/acked', body: '{"n":1}' });
(await acked).ack();
const r0 = receipt(a, 'after-ack');
a.publish({ destination: '/queue/orders', body: '{}', headers: { receipt: 'after-ack' } });
await r0;
console.log('ok ACK by message-id');

// SUBSCRIBE under /app is answered once by the backend (@SubscribeMapping).
const init = await next(a, '/app/init');
if (JSON.parse(init.body).hello !== 'anonymous') fail('subscribe reply ' + init.body);
console.log('ok SUBSCRIBE /app/init answered once');

// With auth: passcode is the token; a refused SEND is told on /user/queue/errors and the
// receipt, and the session goes on.
const [ann, connected] = await connect(authed, { login: 'ann', passcode: token });
if (connected.headers['user-name'] !== 'ann') fail('user-name ' + connected.headers['user-name']);
const errors = next(ann, '/user/queue/errors');
await settle();
const r1 = receipt(ann, 'refused');
ann.publish({ destination: '/app/refuse', body: '{}', headers: { receipt: 'refused' } });
const e = await errors;
if (!JSON.parse(e.body).reason.includes('no handler for /app/refuse')) fail('errors queue ' + e.body);
if ((await r1).headers.refused !== 'forbidden') fail('receipt of a refused SEND');
const pub = next(ann, '/topic/public');
await settle();
ann.publish({ destination: '/app/chat.send', body: '{"text":"still here"}' });
if (JSON.parse((await pub).body).text !== 'still here') fail('after a refusal');
console.log('ok refused SEND on /user/queue/errors, session kept');

try {
  await connect(authed, { login: 'guest', passcode: 'guest' });
  fail('guest connected with auth on');
} catch (err) {
  if (!String(err).includes('unauthorized')) fail('guest with auth on: ' + err);
}
console.log('ok passcode guest refused as unauthorized with auth on');
console.log('PASS');
process.exit(0);
