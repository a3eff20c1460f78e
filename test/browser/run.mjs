// Drives the rtlab page in two headless Chromium browsers (alice and bob) against a running
// server, once per transport: alice moves her marker and bob sees it, alice chats and bob reads
// it, then the server restarts and both pages must resume (and, with the memory broker, say
// that history is gone) and keep working.
//
// usage: node run.mjs --base http://127.0.0.1:PORT --out DIR [--transports ws,sse,...]
//                     [--restart stdin|none]
//
// Restarts are asked of whoever runs us: we print "RESTART <transport>" and wait for a line
// "RESTARTED chat=kept" (the new server has the chat history the old one had: the pages must
// resume without a gap) or "RESTARTED chat=lost" (they must say the history is gone) on stdin;
// web/browser_test.go does that. Location history is in memory and lost on every restart.
// --restart none skips restarts.
// Prints "ok ..." per check, "PASS" at the end; exits non-zero on the first failure.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Browsers, deadline, fail, lines, live, log, main, parseArgs, seesPosition } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const base = args.base || 'http://127.0.0.1:8080';
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
const transports = (args.transports || 'shortpoll,longpoll,sse,ws,stomp').split(',');
const restartMode = args.restart || 'stdin';
const group = 'demo';
const room = 'lobby';
deadline(150000);

const stdin = lines();
const nextLine = stdin.next;

// restartServer returns null without restarts, else whether the chat history was kept.
async function restartServer(label) {
  if (restartMode === 'none') return null;
  console.log(`RESTART ${label}`);
  const answer = (await nextLine()).trim();
  const m = /^RESTARTED chat=(kept|lost)$/.exec(answer);
  if (!m) fail(`restart: got ${JSON.stringify(answer)}`);
  return m[1] === 'kept';
}

const browsers = new Browsers();
const openPage = (user, transport) => browsers.open(base, user, { transport, group, room });

async function inRoom(page, ...users) {
  for (const u of users) await page.locator(`#room-members li[data-user="${u}"]`).waitFor();
}

// drag moves alice's marker across the canvas with real pointer events and returns the
// position her own table shows afterwards.
async function drag(page, fx, fy, tx, ty) {
  const box = await page.locator('#map').boundingBox();
  const at = (x, y) => [box.x + (x / 100) * box.width, box.y + (y / 100) * box.height];
  await page.mouse.move(...at(fx, fy));
  await page.mouse.down();
  for (let i = 1; i <= 8; i++) await page.mouse.move(...at(fx + ((tx - fx) * i) / 8, fy + ((ty - fy) * i) / 8));
  await page.mouse.up();
  const pos = await page.evaluate((u) => {
    const m = window.rtlab.map.members.get(u);
    return `${m.x.toFixed(1)}, ${m.y.toFixed(1)}`;
  }, page.user);
  await seesPosition(page, page.user, pos);
  return pos;
}

async function say(page, text) {
  await page.locator('#talk').fill(text);
  await page.locator('#talk').press('Enter');
}

async function seesChat(page, text) {
  await page.locator('#chat-log li.msg .text', { hasText: text }).first().waitFor();
}

// reconnected waits until page has reconnected (more reconnects than before) and is live.
async function reconnected(page, transport, before) {
  await page.waitForFunction((n) => Number(document.querySelector('#conn-reconnects').textContent) > n, before);
  await live(page, transport);
}

async function counter(page, sel) {
  return Number(await page.locator(sel).textContent());
}

await main({ out, browsers, stdin }, async () => {
  const first = transports[0];
  // Alice comes first so she owns the room and bob's words notify her.
  const a = await openPage('alice', first);
  await live(a, first);
  await inRoom(a, 'alice');
  const b = await openPage('bob', first);
  await live(b, first);
  await inRoom(b, 'alice', 'bob');
  await inRoom(a, 'bob');
  log('ok both pages logged in, in group and room');

  await say(b, 'hi alice, are you there?');
  await seesChat(a, 'hi alice, are you there?');
  await a.locator('#badge:not([hidden])').waitFor();
  await a.locator('#bell').click();
  await a.locator('#notify-list li', { hasText: 'are you there' }).waitFor();
  await a.locator('#badge').waitFor({ state: 'hidden' });
  await a.locator('#bell').click();
  log('ok owner notified: badge, list, marked read');

  for (const [i, t] of transports.entries()) {
    const t0 = Date.now();
    if (i > 0) { // switch live, as a person would
      await Promise.all([a, b].map((p) => p.locator(`#picker input[value=${t}]`).check()));
    }
    await Promise.all([live(a, t), live(b, t)]);
    await Promise.all([inRoom(a, 'alice', 'bob'), inRoom(b, 'alice', 'bob')]);

    const pos = await drag(a, 10 + i * 5, 80, 20 + i * 14, 15 + i * 12);
    await seesPosition(b, 'alice', pos);
    await b.waitForFunction(() => /\d+ ms/.test(document.querySelector('#map-members tr[data-member="alice"] .lat')?.textContent || ''));
    log(`ok ${t}: bob sees alice's marker at ${pos}`);

    const hello = `hello over ${t} (#${i + 1})`;
    await say(a, hello);
    await seesChat(b, hello);
    log(`ok ${t}: bob reads "${hello}"`);

    const reconnects = await Promise.all([a, b].map((p) => counter(p, '#conn-reconnects')));
    const gaps = await Promise.all([a, b].map((p) => p.locator('#chat-log li.gap').count()));
    await Promise.all([a, b].map((p) => p.evaluate(() => document.querySelector('#notices').replaceChildren())));
    const kept = await restartServer(t);
    if (kept !== null) {
      // Alice talks as soon as she is back; bob may still be backing off and must catch up
      // from his offset.
      await reconnected(a, t, reconnects[0]);
      const again = `back after the restart over ${t}`;
      await say(a, again);
      await reconnected(b, t, reconnects[1]);
      await seesChat(b, again);
      await Promise.all([a, b].map(async (p, k) => {
        await p.locator('#notices .notice', { hasText: `History gone on location/${group}` }).waitFor();
        if (kept) {
          const n = await p.locator('#chat-log li.gap').count();
          if (n !== gaps[k]) fail(`${t}: ${p.user}'s chat shows a gap though its history was kept`);
          if (await p.locator('#notices .notice', { hasText: 'History gone on chat/' }).count()) fail(`${t}: ${p.user} says chat history is gone though it was kept`);
        } else {
          await p.locator('#notices .notice', { hasText: `History gone on chat/${room}` }).waitFor();
          await p.waitForFunction((n) => document.querySelectorAll('#chat-log li.gap').length > n, gaps[k]);
        }
      }));
      log(`ok ${t}: both pages resumed; bob reads "${again}"; ${kept ? 'chat history kept, no gap shown' : 'chat history lost, and both pages say so'}`);
      await Promise.all([inRoom(a, 'alice', 'bob'), inRoom(b, 'alice', 'bob')]);
      const pos2 = await drag(a, 50, 50, 60 - i * 8, 40 + i * 9);
      await seesPosition(b, 'alice', pos2);
      log(`ok ${t}: after the restart bob sees alice at ${pos2}`);
    }
    for (const p of [a, b]) {
      await p.evaluate(() => window.scrollTo(0, 0));
      await p.screenshot({ path: path.join(out, `${t}-${p.user}.png`), fullPage: true });
    }
    log(`ok ${t} in ${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${out}`);
  }
});
