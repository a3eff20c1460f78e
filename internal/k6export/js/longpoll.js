// The bench's location users over long polling: read the topic's position, then GET
// /api/poll/{topic}?since=&wait= in a loop; publish with POST /api/publish/{topic}.
import http from 'k6/http';
import { setTimeout } from 'k6/timers';
import { options as opts, user, publisher, Receiver, now, BASE, errors, pubFailed } from './lib.js';
import { W } from './config.js';

export const options = opts();

const LONG = true;

export default async function () {
  const u = user();
  const rx = new Receiver();
  const params = { headers: u.token ? { Authorization: 'Bearer ' + u.token } : {}, timeout: '60s' };
  let since = null;
  let epoch = '';
  for (;;) {
    const q = since === null ? '' : `?since=${since}&limit=1000` + (epoch ? '&epoch=' + epoch : '') + (LONG ? `&wait=${W.longWaitMs}ms` : '');
    const started = Date.now();
    const res = await http.asyncRequest('GET', `${BASE}/api/poll/${u.topic}${q}`, null, params);
    const at = now();
    if (res.status !== 200) {
      errors.add(1);
      await sleep(1000);
      continue;
    }
    const m = res.json();
    if (since === null) {
      rx.open();
      publisher(u, (seq, body) => {
        http.asyncRequest('POST', `${BASE}/api/publish/${u.topic}`, body, params).then((r) => {
          if (r.status !== 200) pubFailed.add(1);
        });
      });
      since = m.offset;
    } else {
      for (const p of m.publications || []) {
        rx.receive(p.data, at);
        since = Math.max(since, p.offset);
      }
    }
    epoch = m.epoch || '';
    if (!LONG && (m.publications || []).length < 1000) await sleep(W.intervalMs - (Date.now() - started));
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
