// Drives the rtlab page into a room that already holds more messages than one page (and than
// the server's live window) and scrolls the chat up until the room's beginning: every message
// must be there once, in order, with nothing missing between pages.
//
// usage: node older.mjs --base http://127.0.0.1:PORT --out DIR --room ROOM --count N
//
// The Go test (web/browser_test.go, TestBrowserOlderMessages) runs the node and publishes the
// room's N TALK messages (offsets 2..N+1 after bob's ENTER) before starting us.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Browsers, deadline, fail, lines, live, log, main, parseArgs } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const base = args.base || 'http://127.0.0.1:8080';
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
const room = args.room || 'archive';
const count = Number(args.count || 300);
deadline(90000);

const stdin = lines();
const browsers = new Browsers();

await main({ out, browsers, stdin }, async () => {
  const a = await browsers.open(base, 'alice', { transport: 'ws', group: 'demo', room });
  await live(a, 'ws');
  await a.locator('#chat-log li[data-offset]').first().waitFor();
  const first = await a.locator('#chat-log li[data-offset]').count();
  log(`ok: the room opened with ${first} messages`);
  // Scroll to the top until the room's beginning shows.
  for (let i = 0; i < 100 && !(await a.locator('#chat-log li.start').count()); i++) {
    await a.locator('#chat-log').evaluate((el) => { el.scrollTop = 0; el.dispatchEvent(new Event('scroll')); });
    await a.waitForTimeout(50).catch(() => {}); // let the page answer; the loop checks what it shows
  }
  await a.locator('#chat-log li.start').waitFor();
  const offsets = await a.locator('#chat-log li[data-offset]').evaluateAll((els) => els.map((e) => Number(e.dataset.offset)));
  // bob's ENTER is 1, the TALKs 2..count+1, then alice's own ENTER (and nothing else).
  for (let i = 0; i < count + 1; i++) {
    if (offsets[i] !== i + 1) fail(`message ${i} shows offset ${offsets[i]}, want ${i + 1}: ${offsets.slice(Math.max(0, i - 3), i + 3)}`);
  }
  if (offsets.length !== count + 2 || offsets[count + 1] !== count + 2) fail(`after the room's ${count + 1} messages came ${offsets.slice(count + 1)}`);
  const text = await a.locator(`#chat-log li[data-offset="2"] .text`).textContent();
  if (text !== 'm0') fail(`the oldest TALK reads ${JSON.stringify(text)}, want "m0"`);
  log(`ok: scrolled back from ${first} to all ${offsets.length} messages, offsets 1..${offsets.length} in order`);
  await a.screenshot({ path: path.join(out, 'older.png') });
});
