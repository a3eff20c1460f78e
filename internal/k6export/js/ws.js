// The bench's location users over rtlab's WebSocket JSON protocol (/api/ws): subscribe to the
// group's topic, publish a position every interval on the same socket, count every receipt.
import { WebSocket } from 'k6/websockets';
import { options as opts, user, publisher, Receiver, now, WS_BASE, errors, pubFailed } from './lib.js';

export const options = opts();

export default function () {
  const u = user();
  const rx = new Receiver();
  let stop = null;
  const ws = new WebSocket(WS_BASE + '/api/ws' + (u.token ? '?access_token=' + u.token : ''));
  ws.onopen = () => ws.send(JSON.stringify({ op: 'subscribe', topic: u.topic }));
  ws.onmessage = (e) => {
    const at = now();
    const m = JSON.parse(e.data);
    switch (m.op) {
      case 'message':
        rx.receive(m.data, at);
        break;
      case 'subscribed':
        rx.open();
        if (!stop) {
          stop = publisher(u, (seq, body) => ws.send(`{"op":"publish","topic":"${u.topic}","id":${seq + 1},"data":${body}}`));
        }
        break;
      case 'error':
        if (m.id) pubFailed.add(1);
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
