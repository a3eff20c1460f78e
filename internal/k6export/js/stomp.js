// The bench's location users over STOMP 1.2 on WebSocket (/api/stomp): CONNECT, SUBSCRIBE to
// /topic/location/{group} with a receipt, SEND a position every interval, count every MESSAGE.
import { WebSocket } from 'k6/websockets';
import { options as opts, user, publisher, Receiver, now, WS_BASE, errors, pubFailed } from './lib.js';

export const options = opts();

// frame splits one STOMP frame into its command, headers and body.
function frame(text) {
  const end = text.indexOf('\n\n');
  const head = (end < 0 ? text : text.slice(0, end)).replace(/^\n+/, '').split('\n');
  const headers = {};
  for (const h of head.slice(1)) {
    const i = h.indexOf(':');
    if (i > 0 && !(h.slice(0, i) in headers)) headers[h.slice(0, i)] = h.slice(i + 1);
  }
  const body = end < 0 ? '' : text.slice(end + 2).replace(/\0[\s\S]*$/, '');
  return { command: head[0], headers, body };
}

export default function () {
  const u = user();
  const rx = new Receiver();
  let stop = null;
  const dest = '/topic/' + u.topic;
  const ws = new WebSocket(WS_BASE + '/api/stomp' + (u.token ? '?access_token=' + u.token : ''), ['v12.stomp']);
  ws.onopen = () => {
    const login = u.token ? `login:k6-u${u.id}\npasscode:${u.token}\n` : '';
    ws.send(`CONNECT\naccept-version:1.2\nhost:rtlab\nheart-beat:0,10000\n${login}\n\0`);
  };
  ws.onmessage = (e) => {
    const at = now();
    if (e.data === '\n' || e.data === '') return; // heart-beat
    const f = frame(e.data);
    switch (f.command) {
      case 'MESSAGE':
        rx.receive(JSON.parse(f.body), at);
        break;
      case 'CONNECTED':
        ws.send(`SUBSCRIBE\nid:0\ndestination:${dest}\nack:auto\nreceipt:sub\n\n\0`);
        break;
      case 'RECEIPT':
        if (f.headers['receipt-id'] === 'sub' && !stop) {
          rx.open();
          stop = publisher(u, (seq, body) =>
            ws.send(`SEND\ndestination:${dest}\ncontent-type:application/json\nreceipt:${seq}\ncontent-length:${body.length}\n\n${body}\0`));
        }
        break;
      case 'ERROR':
        if (f.headers['receipt-id']) pubFailed.add(1);
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
