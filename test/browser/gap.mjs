// Drives the rtlab page on a node that loses its broker while the group keeps moving elsewhere,
// and checks what a person sees when the node comes back and history no longer holds what was
// missed: a notice that history is gone on the group's topic, then the latest position.
//
// usage: node gap.mjs --base http://127.0.0.1:PORT --out DIR [--transport ws]
//
// The Go test (web/browser_test.go, TestBrowserLiveGap) runs the nodes and the broker, and
// talks to us line by line. We print "READY" once the page is live; it publishes carol's first
// position elsewhere and sends "SEE <x, y>"; we print "SAW" once the page shows it; it cuts the
// node off, publishes more than history keeps, heals it, publishes carol's last position and
// sends "GAP <x, y>". We then wait for the notice and that position, and print "PASS".
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Browsers, deadline, fail, lines, live, log, main, parseArgs, seesPosition } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const base = args.base || 'http://127.0.0.1:8080';
const out = args.out || fs.mkdtempSync(path.join(os.tmpdir(), 'rtlab-browser-'));
const transport = args.transport || 'ws';
const group = 'demo';
deadline(90000);

const stdin = lines();
const browsers = new Browsers();

// expect reads the next line, which must be "<word> <rest>", and returns rest.
async function expect(word) {
  const line = (await stdin.next()).trim();
  if (!line.startsWith(word + ' ')) fail(`expected "${word} …" on stdin, got ${JSON.stringify(line)}`);
  return line.slice(word.length + 1);
}

await main({ out, browsers, stdin }, async () => {
  const a = await browsers.open(base, 'alice', { transport, group, room: 'lobby' });
  await live(a, transport);
  // Settled: in the room too, so no subscription (which reopens an SSE stream) is still under
  // way when the node is cut off.
  await a.locator('#room-members li[data-user="alice"]').waitFor();
  console.log('READY');

  const first = await expect('SEE');
  await seesPosition(a, 'carol', first);
  log(`ok ${transport}: alice sees carol at ${first}`);
  console.log('SAW');

  const last = await expect('GAP');
  const notice = a.locator('#notices .notice', { hasText: `History gone on location/${group}` });
  await notice.waitFor();
  const text = await notice.textContent();
  // Told live, while subscribed (not by a refused resume), and not taken for a lost server.
  if (!/no longer retained/.test(text)) fail(`the notice does not say what is gone: ${JSON.stringify(text)}`);
  if (/server lost its history/.test(text)) fail(`the notice blames a lost server for trimmed history: ${JSON.stringify(text)}`);
  await seesPosition(a, 'carol', last);
  log(`ok ${transport}: alice was told "${text.trim()}" and sees carol at ${last}`);
  await a.screenshot({ path: path.join(out, `gap-${transport}.png`), fullPage: true });
});
