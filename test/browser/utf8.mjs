// Tries to publish text that is not UTF-8 from inside the page, on every way a browser has
// (an HTTP body, a binary WebSocket frame on the JSON protocol and on STOMP), and checks that
// each is refused with a reason, that nothing reaches the group's history, and that the page's
// own connection stays live and keeps receiving: before, such a publication was stored and
// sent on in text frames, and Chromium dropped the socket (1006) on every resume.
//
// usage: node utf8.mjs --base http://127.0.0.1:PORT --out DIR
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Browsers, deadline, fail, lines, live, log, main, parseArgs, seesPosition } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const base = args.base || 'http://127.0.0.1:8080';
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
const group = 'demo';
deadline(120000);

const stdin = lines();
const browsers = new Browsers();

// attempt runs in the page: three publishes of {"message":"\xff\xfe"} and what each got back.
async function attempt(page, grp) {
  return page.evaluate(async (g) => {
    const enc = new TextEncoder();
    const bad = (prefix, suffix) => {
      const a = enc.encode(prefix), b = enc.encode(suffix);
      const out = new Uint8Array(a.length + 2 + b.length);
      out.set(a); out.set([0xff, 0xfe], a.length); out.set(b, a.length + 2);
      return out;
    };
    const res = await fetch(`/api/publish/location/${g}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: bad('{"member":"mallory","message":"', '"}') });
    const http = `${res.status} ${await res.text()}`;
    const socket = (url, protocols, frame, done) => new Promise((resolve) => {
      const s = new WebSocket(url, protocols);
      s.binaryType = 'arraybuffer';
      s.onopen = () => s.send(frame);
      s.onmessage = (e) => { const t = typeof e.data === 'string' ? e.data : new TextDecoder().decode(e.data); if (done(t)) { s.close(); resolve(t); } };
      s.onclose = (e) => resolve(`closed ${e.code} ${e.reason}`);
      setTimeout(() => resolve('no answer'), 10000);
    });
    const wsURL = (p) => location.origin.replace(/^http/, 'ws') + p;
    const ws = await socket(wsURL('/api/ws'), [], bad(`{"op":"publish","topic":"location/${g}","data":{"member":"mallory","message":"`, '"}}'), (t) => t.includes('"op":"error"'));
    const stomp = await socket(wsURL('/api/stomp'), ['v12.stomp'],
      bad(`CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/topic/location/${g}\ncontent-type:application/json\n\n{"member":"mallory","message":"`, '"}\0'),
      (t) => t.startsWith('ERROR'));
    return { http, ws, stomp };
  }, grp);
}

await main({ out, browsers, stdin }, async () => {
  for (const [i, transport] of ['ws', 'sse', 'stomp'].entries()) {
    const a = await browsers.open(base, `alice${i}`, { transport, group, room: 'lobby' });
    await live(a, transport);
    const reconnects = Number(await a.locator('#conn-reconnects').textContent());
    const got = await attempt(a, group);
    log(`${transport}: refusals ${JSON.stringify(got)}`);
    if (!/^400 .*UTF-8/.test(got.http)) fail(`HTTP publish not refused with 400 and a reason: ${got.http}`);
    if (!/"op":"error".*UTF-8/.test(got.ws)) fail(`WebSocket publish not refused with an error op: ${got.ws}`);
    if (!/^ERROR[\s\S]*UTF-8/.test(got.stomp)) fail(`STOMP SEND not refused with an ERROR: ${got.stomp}`);

    // The page's own connection carries on: a valid position published next arrives.
    const x = 10 + i;
    const res = await fetch(`${base}/api/publish/location/${group}`, { method: 'POST', body: JSON.stringify({ member: 'carol', x, y: 40 }) });
    if (res.status !== 200) fail(`valid publish: ${res.status} ${await res.text()}`);
    await seesPosition(a, 'carol', `${x}.0, 40.0`);
    await live(a, transport);
    const after = Number(await a.locator('#conn-reconnects').textContent());
    if (after !== reconnects) fail(`${transport}: the page reconnected (${reconnects} -> ${after}) around the attempt`);
    const hist = await (await fetch(`${base}/api/topics/location/${group}/history`)).json();
    if (hist.publications.some((p) => JSON.stringify(p).includes('mallory'))) fail(`a refused publication is in the history: ${JSON.stringify(hist)}`);
    log(`ok ${transport}: all three refused, nothing stored, the page stayed live and sees carol at ${x}.0, 40.0`);
    await a.screenshot({ path: path.join(out, `utf8-${transport}.png`), fullPage: true });
  }
});
