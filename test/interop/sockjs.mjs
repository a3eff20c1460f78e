// Drives sockjs-client with @stomp/stompjs, as a Spring browser client connects, against an
// rtlab SockJS endpoint, over each transport sockjs-client offers in Node.
// usage: node sockjs.mjs http://127.0.0.1:PORT/ws TOKEN
// Prints one line per check and PASS at the end; exits non-zero on the first failure.
import { Client } from '@stomp/stompjs';
import SockJS from 'sockjs-client';

const [url, token] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL ' + msg); process.exit(1); };
setTimeout(() => fail('timed out'), 60000).unref();

function connect(transport) {
  return new Promise((resolve, reject) => {
    const c = new Client({
      webSocketFactory: () => new SockJS(url, null, { transports: [transport], timeout: 10000 }),
      connectHeaders: token ? { passcode: token } : {},
      reconnectDelay: 0,
      heartbeatIncoming: 1000,
      heartbeatOutgoing: 1000,
      onConnect: () => resolve(c),
      onStompError: (f) => reject(new Error('ERROR ' + f.headers.message)),
      onWebSocketClose: (e) => reject(new Error('closed ' + e.code + ' ' + e.reason)),
    });
    c.activate();
  });
}

const transports = process.env.SOCKJS_TRANSPORTS
  ? process.env.SOCKJS_TRANSPORTS.split(',')
  : ['websocket', 'xhr-streaming', 'xhr-polling', 'eventsource'];
for (const t of transports) {
  const c = await connect(t);
  const used = c.webSocket.transport;
  if (used !== t) fail(`${t}: sockjs-client chose ${used}`);
  const dest = '/topic/sockjs/' + t;
  const got = new Promise((resolve) => {
    const msgs = [];
    c.subscribe(dest, (m) => { msgs.push(m); if (msgs.length === 3) resolve(msgs); });
  });
  // The subscription is in place once a receipt for a frame sent after it comes back.
  await new Promise((resolve) => { c.watchForReceipt('r-' + t, resolve); c.publish({ destination: dest, body: JSON.stringify({ n: 0 }), headers: { receipt: 'r-' + t } }); });
  for (let n = 1; n < 3; n++) c.publish({ destination: dest, body: JSON.stringify({ n }) });
  const msgs = await got;
  msgs.forEach((m, i) => {
    if (JSON.parse(m.body).n !== i) fail(`${t}: order ${m.body}`);
    if (m.headers.offset !== String(i + 1)) fail(`${t}: offset ${m.headers.offset}`);
  });
  // Resume: a subscription with since replays what followed.
  const replay = await new Promise((resolve) => {
    const msgs = [];
    c.subscribe(dest, (m) => { msgs.push(m); if (msgs.length === 2) resolve(msgs); }, { since: '1' });
  });
  if (replay.map((m) => m.headers.offset).join() !== '2,3') fail(`${t}: resume ${replay.map((m) => m.headers.offset)}`);
  // Quiet for longer than the heart-beat interval: both sides' heart-beats keep it open.
  await new Promise((r) => setTimeout(r, 2500));
  if (!c.connected) fail(`${t}: dropped while idle`);
  console.log(`ok ${t}: connect, subscribe, publish, receive in order, resume, heart-beats (user ${c.connectedVersion})`);
  await c.deactivate();
}
console.log('PASS');
