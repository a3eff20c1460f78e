// Drives sockjs-client and @stomp/stompjs, as a Spring page loads them, in headless Chromium
// through a proxy that refuses WebSocket upgrades: SockJS must fall back to xhr-streaming, and
// the STOMP session on it must subscribe, publish and receive.
//
// usage: node sockjs.mjs --base http://PROXY --path /ws
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { chromiumPath, deadline, fail, log, parseArgs, timeout } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
deadline(60000);
const mods = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'interop', 'node_modules');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-chromium-sockjs-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: chromiumPath, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await page.goto(`${args.base}/healthz`);
  await page.addScriptTag({ path: path.join(mods, 'sockjs-client', 'dist', 'sockjs.min.js') });
  await page.addScriptTag({ path: path.join(mods, '@stomp', 'stompjs', 'bundles', 'stomp.umd.min.js') });
  const got = await page.evaluate((sockPath) => new Promise((resolve, reject) => {
    const c = new StompJs.Client({
      // A generous transport timeout: on a loaded machine sockjs-client's own (from the info
      // request's round trip, a few hundred ms) can pass before xhr-streaming opens, and it
      // would try the next transport.
      webSocketFactory: () => new SockJS(location.origin + sockPath, null, { timeout: 10000 }),
      reconnectDelay: 0,
      onStompError: (f) => reject(new Error('ERROR ' + f.headers.message)),
    });
    c.onConnect = () => {
      const bodies = [];
      c.subscribe('/topic/browser/sockjs', (m) => {
        bodies.push(JSON.parse(m.body).n);
        if (bodies.length === 3) resolve({ transport: c.webSocket.transport, bodies });
      });
      c.watchForReceipt('sub', () => {
        for (let n = 1; n <= 3; n++) c.publish({ destination: '/topic/browser/sockjs', body: JSON.stringify({ n }) });
      });
      c.publish({ destination: '/topic/browser/sockjs-ready', body: '{}', headers: { receipt: 'sub' } });
    };
    c.activate();
  }), args.path);
  if (got.transport !== 'xhr-streaming') fail(`on ${got.transport}, want xhr-streaming behind a proxy without WebSocket`);
  if (got.bodies.join() !== '1,2,3') fail(`received ${got.bodies}`);
  log(`ok Chromium: WebSocket refused, SockJS on ${got.transport}, STOMP published and received 1,2,3`);
  console.log('PASS');
} finally {
  await ctx.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
