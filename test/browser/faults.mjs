// Drives rtlab.js in headless Chromium behind fault proxies (internal/faultproxy):
//   1. WebSocket, black-holed for 4 s: noticed within maxSilence + 5 s, then every publication
//      of a numbered stream once and in order;
//   2. an SSE stream whose body a proxy buffers: a failed attempt, the client falls back to long
//      polling and gets every publication;
//   3. 50 topics on long polling: at most 2 poll requests in flight; publish → delivery p99,
//      measured in the page.
//
// usage: node faults.mjs --api http://SERVER --ctl http://CONTROL --proxies '{"ws":…,"sse":…,"poll":…}' --out DIR
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumPath, deadline, fail, log, parseArgs, timeout } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const proxies = JSON.parse(args.proxies);
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
const maxSilence = 3000;
deadline(140000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const proxy = (name, what) => fetch(`${args.ctl}/${name}/${what}`, { method: 'POST' });

async function publish(topic, data) {
  const res = await fetch(`${args.api}/api/publish/${topic}`, { method: 'POST', body: JSON.stringify(data) });
  if (!res.ok) fail(`publish: HTTP ${res.status}`);
  return (await res.json()).offset;
}

function publisher(topic) {
  let last = 0;
  let on = true;
  const done = (async () => {
    while (on) {
      last = await publish(topic, { n: last + 1 });
      await sleep(50);
    }
    return last;
  })();
  return () => { on = false; return done; };
}

// follow opens a page at base with a client on topic from offset 0.
async function follow(ctx, base, topic, opts) {
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await page.goto(`${base}/healthz`);
  await page.evaluate(async ({ topic, opts }) => {
    const { Client } = await import('/rtlab.js');
    const w = window.t = { got: [], events: [] };
    const c = w.c = new Client(location.origin, opts);
    c.on('transport', (e) => w.events.push({ at: Date.now(), what: `${e.transport} ${e.event}` }));
    c.subscribe(topic, { since: 0 }, { publication(p) { w.got.push(p.offset); } });
  }, { topic, opts });
  return page;
}

const got = (page) => page.evaluate(() => window.t.got);

async function complete(page, stop, what) {
  const last = await stop();
  await page.waitForFunction((n) => window.t.got.length >= n, last, { timeout: 30000 });
  const g = await got(page);
  if (JSON.stringify(g) !== JSON.stringify(Array.from({ length: last }, (_, i) => i + 1))) fail(`${what}: got ${g.length} of ${last}, not once each in order`);
  return last;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-chromium-faults-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: chromiumPath, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  { // 1. WebSocket black hole
    const topic = `faults/ws-${Date.now()}`;
    const stop = publisher(topic);
    const page = await follow(ctx, proxies.ws, topic, { transports: ['ws'], maxSilence, connectTimeout: 2000, minBackoff: 100, maxBackoff: 1000 });
    await page.waitForFunction(() => window.t.got.length >= 10);
    const at = Date.now();
    await proxy('ws', 'fault/blackhole');
    await page.waitForFunction(() => window.t.events.some((e) => e.what === 'ws failed'), null, { timeout: maxSilence + 5000 });
    const failed = await page.evaluate(() => window.t.events.find((e) => e.what === 'ws failed').at);
    await sleep(Math.max(0, 4000 - (Date.now() - at)));
    await proxy('ws', 'fault/pass');
    await sleep(1000);
    const last = await complete(page, stop, 'ws black hole');
    log(`ok ws black hole noticed after ${failed - at} ms (maxSilence ${maxSilence}); all ${last} once and in order`);
    await page.evaluate(() => window.t.c.close());
  }
  { // 2. SSE buffered by a proxy
    const topic = `faults/sse-${Date.now()}`;
    await proxy('sse', 'fault/buffer-bodies');
    const stop = publisher(topic);
    const page = await follow(ctx, proxies.sse, topic, { transports: ['sse', 'longpoll'], maxSilence, connectTimeout: 2000, minBackoff: 100, maxBackoff: 1000 });
    await page.waitForFunction(() => window.t.got.length >= 10, null, { timeout: 20000 });
    const last = await complete(page, stop, 'sse buffered');
    const w = await page.evaluate(() => ({ events: window.t.events.map((e) => e.what), transport: window.t.c.transport }));
    if (w.transport !== 'longpoll' || !w.events.includes('sse failed')) fail(`sse buffered: on ${w.transport}; ${w.events.join(', ')}`);
    log(`ok sse buffered: ${w.events.join(', ')}; all ${last} once and in order`);
    await page.evaluate(() => window.t.c.close());
    await proxy('sse', 'fault/pass');
  }
  { // 3. 50 topics on long polling
    const page = await ctx.newPage();
    page.setDefaultTimeout(timeout);
    await page.goto(`${proxies.poll}/healthz`);
    const r = await page.evaluate(async () => {
      const { Client } = await import('/rtlab.js');
      let now = 0;
      let most = 0;
      const counting = async (url, init) => {
        const poll = String(url).includes('/api/poll');
        if (poll) most = Math.max(most, ++now);
        try { return await fetch(url, init); } finally { if (poll) now--; }
      };
      const c = new Client(location.origin, { transports: ['longpoll'], fetch: counting });
      const seen = new Map(); // topic#offset → when it arrived
      const waiting = new Map(); // topic#offset → resolve
      const topics = Array.from({ length: 50 }, (_, i) => `faults/many-${Date.now()}-${i}`);
      const arrived = (p) => {
        const k = p.topic + '#' + p.offset;
        seen.set(k, performance.now());
        waiting.get(k)?.();
      };
      for (const t of topics) c.subscribe(t, {}, { publication: arrived });
      while (![...c.subs.values()].every((s) => s.state === 'subscribed')) await new Promise((res) => setTimeout(res, 20));
      const lat = [];
      for (let i = 0; i < 100; i++) {
        const t = topics[(i * 7) % topics.length];
        const at = performance.now();
        const ack = await c.publish(t, { i });
        const k = t + '#' + ack.offset;
        if (!seen.has(k)) {
          await Promise.race([new Promise((res) => waiting.set(k, res)), new Promise((res) => setTimeout(res, 5000))]);
          waiting.delete(k);
        }
        lat.push((seen.get(k) ?? performance.now()) - at);
      }
      c.close();
      lat.sort((a, b) => a - b);
      return { most, p50: Math.round(lat[49]), p99: Math.round(lat[98]) };
    });
    log(`50 topics on long polling: ${r.most} poll requests in flight at most; publish → delivery p50 ${r.p50} ms, p99 ${r.p99} ms`);
    if (r.most > 2) fail(`${r.most} poll requests in flight`);
    if (r.p99 > 250) fail(`publish → delivery p99 ${r.p99} ms, want ≤ 250`);
  }
  console.log('PASS');
} catch (e) {
  if (!process.exitCode) console.error('FAIL ' + (e.stack || e.message));
  process.exitCode = 1;
  for (const [i, p] of ctx.pages().entries()) await p.screenshot({ path: path.join(out, `faults-failure-${i}.png`) }).catch(() => {});
} finally {
  await ctx.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
