// The profile's WebSocket users: open the route, send the subscribe frames, count from when the
// profile says the subscription is in place, publish the profile's frame every interval on the
// same socket, read each delivery where the profile reads it.
import { WebSocket } from 'k6/websockets';
import { setTimeout } from 'k6/timers';
import { options as opts, publisher, now, BASE, errors } from './lib.js';
import { P, user, url, headers, render, parse, readyBy, deliver, Receiver } from './profile.js';

export const options = opts();
const T = P.transports.ws;

export default function () {
  const u = user();
  const rx = new Receiver();
  let stop = null;
  const ready = () => {
    if (stop) return;
    rx.open();
    stop = publisher(u, (seq, body, at) => ws.send(render(T.publish.body, u, seq, at)));
  };
  const params = { headers: headers(T, u) };
  const ws = new WebSocket(url(BASE.replace(/^http/, 'ws'), T, T.url, u), T.subprotocols || [], params);
  ws.onopen = () => {
    for (const f of T.subscribe.send || []) ws.send(render(f, u));
    if (T.subscribe.ready.kind === 'open') ready();
    if (T.subscribe.ready.kind === 'delay') setTimeout(ready, T.subscribe.ready.delayMs);
  };
  ws.onmessage = (e) => {
    const at = now();
    for (const line of T.lines ? String(e.data).split('\n') : [String(e.data)]) {
      if (T.lines && line.trim() === '') continue;
      if (T.ping && line === T.ping) {
        ws.send(T.pong);
        continue;
      }
      const obj = parse(line);
      if (readyBy(T, obj)) ready();
      deliver(T, rx, line, obj, at);
    }
  };
  ws.onerror = () => errors.add(1);
  ws.onclose = () => {
    if (stop) stop();
    rx.close();
  };
}
