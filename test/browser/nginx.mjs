// Loads a page through a reverse proxy (nginx on a port of its own, test/ops/nginx_test.go) in
// headless Chromium and checks that every transport the page can use answers it: short and
// long polls, SSE, WebSocket, STOMP over WebSocket, and SockJS on its websocket transport only,
// so that a refused upgrade cannot hide behind a fallback. The browser sends Origin with the
// proxy's port: a proxy that rewrites Host without it gets each upgrade refused (403). The page
// is on the name rtlab.test, mapped to the proxy's address, as a loopback origin is always
// allowed in dev mode.
//
// usage: node nginx.mjs --base http://PROXY --sockjs /ws
// Prints "ok <transport>" per transport and "PASS"; exits non-zero on the first failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { chromiumPath, deadline, fail, log, parseArgs, timeout } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
deadline(120000);
const mods = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'interop', 'node_modules');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-chromium-nginx-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: chromiumPath, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    `--host-resolver-rules=MAP rtlab.test ${new URL(args.base).hostname}`],
});
const base = new URL(args.base);
base.hostname = 'rtlab.test';

// Each check runs in the page: it publishes {n} with fetch (same origin) and resolves once the
// transport delivered it, or rejects with what the server answered.
const checks = {
  shortpoll: async (t) => {
    await publish(t, 1);
    const r = await fetch(`/api/poll/${t}?since=0`);
    const ans = await r.json();
    if (!r.ok || ans.publications?.[0]?.data?.n !== 1) throw new Error(`${r.status} ${JSON.stringify(ans)}`);
  },
  longpoll: async (t) => {
    const top = await (await fetch(`/api/poll/${t}`)).json();
    const wait = fetch(`/api/poll/${t}?since=${top.offset}&epoch=${top.epoch}&wait=30s`);
    await new Promise((ok) => setTimeout(ok, 200));
    await publish(t, 1);
    const r = await wait;
    const ans = await r.json();
    if (!r.ok || ans.publications?.[0]?.data?.n !== 1) throw new Error(`${r.status} ${JSON.stringify(ans)}`);
  },
  sse: async (t) => {
    await publish(t, 1);
    await new Promise((ok, no) => {
      const es = new EventSource(`/api/sse?topic=${t}&since=0`);
      es.onmessage = (e) => { if (JSON.parse(e.data).data?.n === 1) { es.close(); ok(); } };
      es.onerror = () => { es.close(); no(new Error('EventSource error (refused?)')); };
    });
  },
  ws: async (t) => {
    await publish(t, 1);
    await new Promise((ok, no) => {
      const ws = new WebSocket(`ws://${location.host}/api/ws`);
      ws.onopen = () => ws.send(JSON.stringify({ op: 'subscribe', topic: t, since: 0 }));
      ws.onmessage = (e) => { const m = JSON.parse(e.data); if (m.op === 'message' && m.data?.n === 1) { ws.close(); ok(); } };
      ws.onclose = (e) => no(new Error(`closed ${e.code} before the message (upgrade refused?)`));
    });
  },
  stomp: (t) => new Promise((ok, no) => {
    const ws = new WebSocket(`ws://${location.host}/api/stomp`, ['v12.stomp']);
    ws.onopen = () => ws.send('CONNECT\naccept-version:1.2\nhost:rtlab\n\n\0');
    ws.onmessage = (e) => {
      const cmd = e.data.split('\n')[0];
      if (cmd === 'CONNECTED') ws.send(`SUBSCRIBE\nid:0\ndestination:/topic/${t}\nreceipt:sub\n\n\0`);
      else if (cmd === 'RECEIPT') publish(t, 1).catch(no);
      else if (cmd === 'MESSAGE' && e.data.includes('{"n":1}')) { ws.close(); ok(); }
      else if (cmd === 'ERROR') no(new Error(e.data));
    };
    ws.onclose = (e) => no(new Error(`closed ${e.code} (upgrade refused?)`));
  }),
  sockjs: (t, sockPath) => new Promise((ok, no) => {
    const c = new StompJs.Client({
      webSocketFactory: () => new SockJS(location.origin + sockPath, null, { transports: ['websocket'], timeout: 10000 }),
      reconnectDelay: 0,
      onStompError: (f) => no(new Error('ERROR ' + f.headers.message)),
      onWebSocketClose: (e) => no(new Error(`SockJS closed ${e.code} ${e.reason}`)),
    });
    c.onConnect = () => {
      c.subscribe(`/topic/${t}`, (m) => {
        if (JSON.parse(m.body).n === 1 && c.webSocket.transport === 'websocket') { c.deactivate(); ok(); }
      }, { receipt: 'sub' });
      c.watchForReceipt('sub', () => publish(t, 1).catch(no));
    };
    c.activate();
  }),
};

try {
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await page.goto(`${base.origin}/healthz`);
  await page.addScriptTag({ path: path.join(mods, 'sockjs-client', 'dist', 'sockjs.min.js') });
  await page.addScriptTag({ path: path.join(mods, '@stomp', 'stompjs', 'bundles', 'stomp.umd.min.js') });
  await page.evaluate(() => {
    window.publish = async (t, n) => {
      const r = await fetch(`/api/publish/${t}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ n }) });
      if (!r.ok) throw new Error(`publish ${t}: ${r.status} ${await r.text()}`);
    };
  });
  for (const [name, check] of Object.entries(checks)) {
    const err = await page.evaluate(`(${check})('nginx/${name}', ${JSON.stringify(args.sockjs)}).then(() => '', (e) => String(e))`);
    if (err) fail(`${name} through ${base.origin}: ${err}`);
    log(`ok ${name}`);
  }
  console.log('PASS');
} finally {
  await ctx.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
