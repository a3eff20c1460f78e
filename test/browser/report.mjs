// Opens a report.html written by `rtlab report` in Chromium, as a reader opening it from disk
// would, and checks that its charts drew: every chart named in --charts has a canvas with
// coloured lines on it (the transports' strokes, not only the grey axes) and a legend naming
// every transport in --series. Screenshots of the page and of each chart go to --out. Run by
// web/report_browser_test.go.
import { chromium } from 'playwright-core';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromiumPath, deadline, fail, log, parseArgs, timeout } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const charts = String(args.charts || '').split(',').filter(Boolean);
const series = String(args.series || '').split(',').filter(Boolean);
if (!args.file || !args.out || charts.length === 0) fail('usage: report.mjs --file report.html --out DIR --charts id,… --series label,…');
deadline(90000);

const browser = await chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(timeout);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  // The page must need no network: every request but the file itself fails the test.
  await page.route('**/*', (route) => {
    if (route.request().url().startsWith('file:')) return route.continue();
    errors.push('network request ' + route.request().url());
    return route.abort();
  });
  await page.goto(pathToFileURL(path.resolve(args.file)).href);

  for (const id of charts) {
    const box = page.locator(`#chart-${id}`);
    await box.locator('canvas').waitFor();
    // uPlot draws on the next frame: wait until the strokes are there, then measure them.
    const ink = await page.waitForFunction((id) => {
      const c = document.querySelector(`#chart-${id} canvas`);
      if (!c || c.width === 0 || c.height === 0) return false;
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let coloured = 0;
      for (let i = 0; i < d.length; i += 4) {
        const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
        if (a > 128 && Math.max(r, g, b) - Math.min(r, g, b) > 60) coloured++;
      }
      return coloured > 50 ? { coloured, width: c.width, height: c.height } : false;
    }, id).then((h) => h.jsonValue()).catch(() => fail(`chart ${id}: no coloured line drawn on its canvas`));
    const legend = await box.locator('.u-legend .u-series .u-label').allTextContents();
    for (const s of series) {
      if (!legend.some((l) => l.startsWith(s))) fail(`chart ${id}: legend ${JSON.stringify(legend)} lacks ${s}`);
    }
    const title = await box.locator('.u-title').textContent();
    log(`chart ${id} "${title}": ${ink.coloured} coloured pixels on ${ink.width}×${ink.height}, legend ${JSON.stringify(legend)}`);
    console.log(`CHART ${id} ${title}`);
    await box.screenshot({ path: path.join(args.out, `chart-${id}.png`) });
  }
  await page.screenshot({ path: path.join(args.out, 'report.png'), fullPage: true });
  if (errors.length > 0) fail('the page reported errors: ' + errors.join('; '));
  console.log('PASS');
} catch (e) {
  if (!process.exitCode) console.error('FAIL ' + (e.stack || e.message));
  process.exitCode = 1;
} finally {
  await browser.close();
}
