// Drives rtlab.js in headless Chromium through a proxy that refuses WebSocket upgrades (403),
// as some corporate proxies do: the client must fall back from ws and stomp to SSE while a
// publisher sends 200 messages, and the page must receive all 200, once each and in order. A
// subscription from offset 0 to a topic whose history was trimmed must get a gap event.
//
// usage: node fallback.mjs --base http://PROXY --out DIR --topic T --trimmed T2
//
// The Go test (web/fallback_test.go) runs the server and the proxy. We print "READY" once the
// client is created (its first WebSocket attempt under way); it then publishes 1..200 on the
// topic. We print "FALLBACK_MS <n>": the time from the client's start, its first (blocked)
// WebSocket attempt, to the first message over the fallback transport; then "PASS".
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumPath, deadline, fail, log, parseArgs, timeout } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
deadline(60000);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-chromium-fallback-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: chromiumPath, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
let ok = false;
try {
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on('pageerror', (e) => fail(`page error: ${e.message}`));
  await page.goto(`${args.base}/healthz`);
  await page.evaluate(async ({ topic, trimmed }) => {
    const { Client } = await import('/rtlab.js');
    const w = window.fallback = { got: [], tried: [], gaps: [], start: performance.now(), first: 0 };
    const c = w.client = new Client(location.origin);
    c.on('transport', (e) => w.tried.push(`${e.transport} ${e.event}`));
    c.subscribe(topic, { since: 0 }, {
      publication(p) { w.first ||= performance.now(); w.got.push(p.offset); },
    });
    c.subscribe(trimmed, { since: 0 }, { gap(g) { w.gaps.push(g); } });
  }, { topic: args.topic, trimmed: args.trimmed });
  console.log('READY');
  await page.waitForFunction(() => window.fallback.got.length >= 200, null, { timeout: 30000 });
  const w = await page.evaluate(() => ({ ...window.fallback, client: undefined, transport: window.fallback.client.transport }));
  const want = Array.from({ length: 200 }, (_, i) => i + 1);
  if (JSON.stringify(w.got) !== JSON.stringify(want)) fail(`received ${w.got.length}, not 1..200 once each in order: ${w.got.join(',')}`);
  if (w.transport !== 'sse') fail(`on ${w.transport}, want sse; tried ${w.tried.join(', ')}`);
  if (!w.tried.includes('ws failed') || !w.tried.includes('stomp failed')) fail(`tried ${w.tried.join(', ')}`);
  log(`ok all 200 once and in order over ${w.transport}; tried ${w.tried.join(', ')}`);
  console.log(`FALLBACK_MS ${Math.round(w.first - w.start)}`);
  await page.waitForFunction(() => window.fallback.gaps.length > 0);
  const gap = await page.evaluate(() => window.fallback.gaps[0]);
  if (!/fell out of history/.test(gap.reason)) fail(`gap: ${JSON.stringify(gap)}`);
  log(`ok trimmed history: gap "${gap.reason}"`);
  ok = true;
} catch (e) {
  if (!process.exitCode) console.error('FAIL ' + (e.stack || e.message));
  process.exitCode = 1;
  await ctx.pages()[0]?.screenshot({ path: path.join(out, 'fallback-failure.png') }).catch(() => {});
} finally {
  await ctx.close().catch(() => {});
  fs.rmSync(dir, { recursive: true, force: true });
}
if (ok) console.log('PASS');
