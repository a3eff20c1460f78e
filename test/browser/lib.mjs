// What the browser scripts share: launching Chromium on the page, waiting on what it shows,
// talking to the Go test over stdin and stdout, and failing loudly.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

export const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
export const timeout = 15000;

const started = Date.now();
export const log = (...a) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s]`, ...a);

// fail reports the first failure and throws, so the script's catch takes screenshots.
export const fail = (msg) => { console.error('FAIL ' + msg); process.exitCode = 1; throw new Error(msg); };

// deadline ends the script with a failure after ms, whatever it is waiting on.
export function deadline(ms) {
  setTimeout(() => { console.error(`FAIL timed out after ${ms / 1000} s`); process.exit(1); }, ms).unref();
}

// lines reads stdin line by line: next() resolves to the next line, close() stops reading.
export function lines() {
  const rl = readline.createInterface({ input: process.stdin });
  const queue = [];
  const waiters = [];
  rl.on('line', (l) => (waiters.length ? waiters.shift()(l) : queue.push(l)));
  return {
    next: () => new Promise((resolve) => (queue.length ? resolve(queue.shift()) : waiters.push(resolve))),
    close: () => rl.close(),
  };
}

// Browsers keeps the launched browsers, to screenshot them on failure and close them at the end.
export class Browsers {
  constructor() { this.list = []; }

  // open launches a browser on the page at base as user, with the given transport, group and room.
  async open(base, user, { transport, group, room }) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rtlab-chromium-${user}-`));
    const ctx = await chromium.launchPersistentContext(dir, {
      executablePath: chromiumPath,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1280, height: 900 },
    });
    this.list.push({ ctx, dir });
    const page = ctx.pages()[0] || await ctx.newPage();
    page.setDefaultTimeout(timeout);
    page.on('pageerror', (e) => fail(`${user}: page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource|WebSocket connection/.test(m.text())) log(`${user} console: ${m.text()}`); });
    await page.goto(`${base}/?user=${user}&transport=${transport}&group=${group}&room=${room}`);
    page.user = user;
    return page;
  }

  // screenshot saves each page as failure-K.png in out.
  async screenshot(out) {
    for (const [k, { ctx }] of this.list.entries()) {
      const page = ctx.pages()[0];
      if (page) await page.screenshot({ path: path.join(out, `failure-${k}.png`), fullPage: true }).catch(() => {});
    }
  }

  async close() {
    for (const { ctx, dir } of this.list) {
      await ctx.close().catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}

// main runs body and prints "PASS" when it resolves. When it fails, main reports the failure
// (unless fail already did), screenshots the pages into out and sets a failing exit code. It
// closes the browsers and stdin either way.
export async function main({ out, browsers, stdin }, body) {
  try {
    await body();
    console.log('PASS');
  } catch (e) {
    if (!process.exitCode) console.error('FAIL ' + (e.stack || e.message));
    process.exitCode = 1;
    await browsers.screenshot(out);
  } finally {
    await browsers.close();
    stdin.close();
  }
}

// live waits until the page's connection is live on the given transport.
export async function live(page, transport) {
  await page.waitForFunction((t) => document.body.dataset.transport === t && document.body.dataset.state === 'live', transport);
}

// seesPosition waits until the page's member table shows member at pos ("12.5, 40.0").
export async function seesPosition(page, member, pos) {
  await page.waitForFunction(([m, p]) => document.querySelector(`#map-members tr[data-member="${m}"] .pos`)?.textContent === p, [member, pos]);
}

export function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) o[k] = argv[++i];
    else o[k] = true;
  }
  return o;
}
