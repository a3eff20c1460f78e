// The profile's STOMP users over WebSocket: CONNECT with the profile's headers, SUBSCRIBE to its
// destination (with a receipt when the profile waits for one), SEND its body every interval,
// read each MESSAGE where the profile reads it.
import { WebSocket } from 'k6/websockets';
import { setTimeout } from 'k6/timers';
import { options as opts, publisher, now, BASE, errors, pubFailed } from './lib.js';
import { P, user, url, headers, render, parse, readyBy, deliver, Receiver } from './profile.js';

export const options = opts();
const T = P.transports.stomp;

// frame splits one STOMP frame into its command, headers and body.
function frame(text) {
  const end = text.indexOf('\n\n');
  const head = (end < 0 ? text : text.slice(0, end)).replace(/^\n+/, '').split('\n');
  const hs = {};
  for (const h of head.slice(1)) {
    const i = h.indexOf(':');
    if (i > 0 && !(h.slice(0, i) in hs)) hs[h.slice(0, i)] = h.slice(i + 1);
  }
  const body = end < 0 ? '' : text.slice(end + 2).replace(/\0[\s\S]*$/, '');
  return { command: head[0], headers: hs, body };
}

// lines are STOMP header lines from [name, template] pairs.
function lines(pairs, u, seq, at) {
  return pairs.map(([k, v]) => k + ':' + render(v, u, seq, at) + '\n').join('');
}

// connect is CONNECT's header lines: the bench's defaults, then the profile's.
function connect(u) {
  const hs = new Map([['accept-version', '1.2'], ['host', BASE.replace(/^\w+:\/\//, '').replace(/\/.*$/, '')], ['heart-beat', '0,0']]);
  for (const [k, v] of T.connect || []) hs.set(k, render(v, u));
  return [...hs].map(([k, v]) => k + ':' + v + '\n').join('');
}

export default function () {
  const u = user();
  const rx = new Receiver();
  let stop = null;
  const ready = () => {
    if (stop) return;
    rx.open();
    stop = publisher(u, (seq, body, at) => {
      const b = render(T.publish.body, u, seq, at);
      const receipt = T.publish.ack === 'receipt' ? `receipt:${seq}\n` : '';
      ws.send(`SEND\ndestination:${render(T.publish.destination, u, seq, at)}\n${lines(T.publish.headers || [], u, seq, at)}${receipt}content-length:${b.length}\n\n${b}\0`);
    });
  };
  const rd = T.subscribe.ready;
  const ws = new WebSocket(url(BASE.replace(/^http/, 'ws'), T, T.url, u), T.subprotocols || [], { headers: headers(T, u) });
  ws.onopen = () => ws.send(`CONNECT\n${connect(u)}\n\0`);
  ws.onmessage = (e) => {
    const at = now();
    if (e.data === '\n' || e.data === '') return; // heart-beat
    const f = frame(String(e.data));
    switch (f.command) {
      case 'CONNECTED': {
        const receipt = rd.kind === 'receipt' ? 'receipt:sub\n' : '';
        ws.send(`SUBSCRIBE\nid:0\ndestination:${render(T.subscribe.destination, u)}\nack:auto\n${lines(T.subscribe.headers || [], u)}${receipt}\n\0`);
        if (rd.kind === 'open') ready();
        if (rd.kind === 'delay') setTimeout(ready, rd.delayMs);
        break;
      }
      case 'MESSAGE': {
        const obj = parse(f.body);
        if (readyBy(T, obj)) ready();
        deliver(T, rx, f.body, obj, at);
        break;
      }
      case 'RECEIPT':
        if (f.headers['receipt-id'] === 'sub') ready();
        break;
      case 'ERROR':
        if (f.headers['receipt-id'] && f.headers['receipt-id'] !== 'sub') pubFailed.add(1);
        else errors.add(1);
        break;
    }
  };
  ws.onerror = () => errors.add(1);
  ws.onclose = () => {
    if (stop) stop();
    rx.close();
  };
}
