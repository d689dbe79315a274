// Screenshots of fxprof's profiles in a Firefox Profiler front end (a developer tool, not part of `make test`).
//   node tools/screenshots/shoot.mjs PROFILER_URL OUTDIR [SCENARIO...]
// Each scenario runs fxprof as a user would (`record -n`, `load -n`, `diff --serve`) with PROFILER_URL set, opens
// the URL exactly as fxprof prints it in headless Chromium (puppeteer-core), waits for the profile, clicks
// through the views the scenario names and saves PNGs in OUTDIR; then it stops fxprof (SIGINT, as Ctrl+C).
// Environment: FXPROF (default build/fxprof), PROGRAMS (default build-programs: tests/programs built),
// DEMO (default build/examples/demo/fxprof_demo), CHROMIUM (default /usr/bin/chromium), NODE_PATH to the
// node_modules of a puppeteer-core (see "Screenshots of the front end" in README.md).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const require = createRequire(import.meta.url);
const puppeteer = require('puppeteer-core');

const [profilerUrl, outDir, ...only] = process.argv.slice(2);
if (!profilerUrl || !outDir) {
  console.error('usage: node shoot.mjs PROFILER_URL OUTDIR [SCENARIO...]');
  process.exit(2);
}
const fxprof = resolve(process.env.FXPROF ?? 'build/fxprof');
const programs = resolve(process.env.PROGRAMS ?? 'build-programs');
const demo = resolve(process.env.DEMO ?? 'build/examples/demo/fxprof_demo');
const prog = (name) => join(programs, name);
const scratch = mkdtempSync(join(tmpdir(), 'fxprof-shots-'));

// Runs fxprof until it prints a Firefox Profiler URL; returns {url, stop}.
let served = 0;
function serve(args, env = {}) {
  // record -n still writes its profile: into the scratch folder, not the current one.
  if (args[0] === 'record') args = ['record', '-o', join(scratch, `served-${served++}.json.gz`), ...args.slice(1)];
  return new Promise((ok, fail) => {
    const child = spawn(fxprof, args, {
      env: { ...process.env, PROFILER_URL: profilerUrl, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const pattern = new RegExp(`${profilerUrl.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/\\S+`);
    const onData = (d) => {
      out += d;
      const m = out.match(pattern);
      if (m) {
        child.stdout.off('data', onData);
        child.stderr.off('data', onData);
        const stopped = new Promise((r) => child.on('exit', r));
        ok({ url: m[0], output: out, stop: () => (child.kill('SIGINT'), stopped) });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => fail(new Error(`fxprof ${args.join(' ')} exited ${code} before a URL:\n${out}`)));
  });
}

function run(args) {
  return execFileSync(fxprof, args, { env: { ...process.env, PROFILER_URL: profilerUrl }, encoding: 'utf8' });
}

async function openProfile(browser, url) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1600, height: 1000 });
  const log = [];
  page.on('console', (m) => log.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => log.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  await page.goto(url, { waitUntil: 'networkidle0', timeout: 120000 });
  try {
    await page.waitForSelector('.profileViewer', { timeout: 60000 });
  } catch (e) {
    await page.screenshot({ path: join(outDir, 'load-failed.png') });
    throw new Error(`${url} did not load (${join(outDir, 'load-failed.png')}):\n${log.join('\n')}`);
  }
  await page.waitForNetworkIdle({ idleTime: 1500, timeout: 120000 });
  return page;
}

const settle = (page) => page.waitForNetworkIdle({ idleTime: 800, timeout: 60000 }).then(() => delay(500));
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

async function tab(page, name) {
  await page.click(`li.tabBarTab[data-name="${name}"] button`);
  await settle(page);
}

// Clicks the timeline track whose label contains TEXT (selects its thread).
async function track(page, text) {
  const buttons = await page.$$('.timelineTrackNameButton');
  for (const b of buttons) {
    const label = await b.evaluate((e) => e.textContent);
    if (label.includes(text)) {
      await b.evaluate((e) => e.scrollIntoView({ block: 'center' }));
      await b.click();
      await settle(page);
      return b;
    }
  }
  throw new Error(`no track labelled ${text}`);
}

// Moves the mouse over the graph of the track labelled TEXT, at fraction FX of its width.
async function hoverTrack(page, text, fx, fy = 0.5) {
  const rows = await page.$$('.timelineTrackRow, .timelineTrackLocalRow');
  for (const row of rows) {
    const label = await row.evaluate((e) => e.querySelector('.timelineTrackNameButton')?.textContent ?? '');
    if (!label.includes(text)) continue;
    await row.evaluate((e) => e.scrollIntoView({ block: 'center' }));
    const graph = await row.$('.timelineTrackTrack canvas, .timelineTrackTrack');
    const box = await graph.boundingBox();
    await page.mouse.move(box.x + box.width * fx, box.y + box.height * fy);
    await delay(400);
    return;
  }
  throw new Error(`no track row labelled ${text}`);
}

async function hoverIn(page, selector, fx, fy) {
  const el = await page.waitForSelector(selector);
  const box = await el.boundingBox();
  await page.mouse.move(box.x + box.width * fx, box.y + box.height * fy);
  await delay(400);
}

// The selected thread's name as the front end shows it (the selected track's label).
const selectedTrack = (page) =>
  page.evaluate(() => document.querySelector('.timelineTrackRow.selected .timelineTrackNameButton')?.textContent ?? '?');

async function shot(page, name) {
  const file = join(outDir, `${name}.png`);
  await page.screenshot({ path: file });
  console.log(`${file}  (selected track: ${await selectedTrack(page)})`);
}


const scenarios = {
  // The main job: make demo's profile.
  async demo(browser) {
    const s = await serve(['record', '-n', '--', demo]);
    const page = await openProfile(browser, s.url);
    await shot(page, 'demo-calltree');
    await tab(page, 'flame-graph');
    await shot(page, 'demo-flame-graph');
    await tab(page, 'stack-chart');
    await shot(page, 'demo-stack-chart');
    await s.stop();
  },
  // Counter tracks: steps to the end of the process (issue 38.2). 50 MiB held 800 ms, freed, 600 ms more.
  async counters(browser) {
    const s = await serve(['record', '-n', '--heap', '--', prog('rss_touch'), '50', '800', '600']);
    const page = await openProfile(browser, s.url);
    await shot(page, 'counters-timeline');
    for (const [name, label] of [
      ['heap', 'Heap'],
      ['rss', 'RSS'],
      ['faults', 'Page faults'],
      ['switches', 'Context switches'],
      ['runqueue', 'Run-queue'],
    ]) {
      try {
        await hoverTrack(page, label, 0.75);
        await shot(page, `counters-${name}-tooltip`);
      } catch (e) {
        console.log(`counters: ${e.message}`);
      }
    }
    // The tracks' last samples: at the process's end (the tooltip's time is the nearest sample's).
    await hoverTrack(page, 'Memory', 0.995);
    await shot(page, 'counters-end-tooltip');
    await s.stop();
  },
  // The printed URL opens the busiest thread of a 16-thread program (issue 38.1).
  async many(browser) {
    const s = await serve(['record', '-n', '--', prog('e2e_many')]);
    const page = await openProfile(browser, s.url);
    await shot(page, 'many-threads');
    await s.stop();
  },
  // A baked profile opened with load: source and assembly (issue 38.3).
  async baked(browser) {
    const file = join(scratch, 'baked.json.gz');
    run(['record', '--save-only', '-q', '-o', file, '--', prog('dq_work'), '300']);
    const s = await serve(['load', '-n', file]);
    console.log(s.output.trim());
    const page = await openProfile(browser, s.url);
    await tab(page, 'calltree');
    // Opens the source view of the heaviest self function: invert the tree, double-click its first row.
    await page.evaluate(() => {
      for (const l of document.querySelectorAll('.stackSettings label'))
        if (/invert/i.test(l.textContent)) l.click();
    });
    await settle(page);
    // The first row of a function with a source file (not [preempted], not the kernel's).
    const rows = await page.$$('.treeViewRowScrolledColumns');
    let row = null;
    for (const r of rows)
      if (/\.(cpp|h|c)\b/.test(await r.evaluate((e) => e.textContent))) {
        row = r;
        break;
      }
    if (!row) throw new Error('baked: no call tree row with a source file');
    await row.click();
    await row.click({ count: 2 });
    await settle(page);
    await shot(page, 'baked-source');
    const buttons = await page.$$('.bottom-box-header-trailing-buttons button');
    for (const b of buttons) {
      const t = await b.evaluate((e) => `${e.textContent} ${e.title}`);
      if (/assembly/i.test(t)) {
        await b.click();
        await settle(page);
        break;
      }
    }
    await shot(page, 'baked-assembly');
    await s.stop();
  },
  // Data-quality markers on the affected process's main thread (issue 38.4): a shell starts a busy gzip, and
  // a ring buffer too small for the rate loses records.
  async quality(browser) {
    const input = join(scratch, 'input.bin');
    writeFileSync(input, Buffer.alloc(64 << 20, 7));
    const s = await serve([
      'record', '-n', '-F', '4000', '--buffer-size', '65536', '--',
      'sh', '-c', `gzip -9 -c ${input} > /dev/null; gzip -9 -c ${input} > /dev/null`,
    ]);
    console.log(s.output.trim());
    const page = await openProfile(browser, s.url);
    await tab(page, 'marker-chart');
    await shot(page, 'quality-marker-chart');
    await tab(page, 'marker-table');
    await shot(page, 'quality-marker-table');
    await s.stop();
  },
  // Markers from the header (issue 33.5): the marker chart, a tooltip with its fields, the table's sidebar.
  async markers(browser) {
    const s = await serve(['record', '-n', '--', prog('markers_requests'), join(scratch, 'truth.txt')]);
    const page = await openProfile(browser, s.url);
    await tab(page, 'marker-chart');
    await shot(page, 'markers-chart');
    await hoverMarker(page, 'request');
    await shot(page, 'markers-tooltip');
    await tab(page, 'marker-table');
    await shot(page, 'markers-table');
    await s.stop();
  },
  // --usdt markers (issue 33.5): our own probes as interval markers with their arguments.
  async usdt(browser) {
    const s = await serve([
      'record', '-n', '--usdt-pair', '--usdt', 'fxtest:request__start=id:%d,kind:%s',
      '--usdt', 'fxtest:request__done=-,status:%d', '--usdt', 'fxtest:tick', '--',
      prog('usdt_requests'), '60', join(scratch, 'usdt-truth.txt'),
    ]);
    const page = await openProfile(browser, s.url);
    await tab(page, 'marker-chart');
    await shot(page, 'usdt-chart');
    await hoverMarker(page, 'fxtest:request');
    await shot(page, 'usdt-tooltip');
    await s.stop();
  },
  // The "critical path of T" track (issue 34): cp_a waits on cp_b, cp_b on cp_c's 300 ms compute.
  async critical(browser) {
    const s = await serve(['record', '-n', '--', prog('critical_chain'), 'threads']);
    const page = await openProfile(browser, s.url);
    await shot(page, 'critical-timeline');
    await track(page, 'critical path');
    await tab(page, 'calltree');
    await shot(page, 'critical-calltree');
    await tab(page, 'flame-graph');
    await shot(page, 'critical-flame-graph');
    await s.stop();
  },
  // diff --serve's comparison view.
  async diff(browser) {
    const a = join(scratch, 'a.json.gz');
    const b = join(scratch, 'b.json.gz');
    run(['record', '--save-only', '-q', '-o', a, '--', prog('dq_work'), '200']);
    run(['record', '--save-only', '-q', '-o', b, '--', prog('dq_work'), '400']);
    const s = await serve(['diff', '--serve', '-o', join(scratch, 'diff.svg'), a, b]);
    const page = await openProfile(browser, s.url);
    await shot(page, 'diff-compare');
    await s.stop();
  },
};

// Hovers the marker chart's canvas until the tooltip of a marker whose title contains NAME shows.
async function hoverMarker(page, name) {
  const canvas = await page.waitForSelector('.chartViewport canvas, .markerChartCanvas, canvas.chartCanvas');
  const box = await canvas.boundingBox();
  for (let y = 7; y < Math.min(box.height, 300); y += 7)
    for (let x = 0.1; x < 0.95; x += 0.04) {
      await page.mouse.move(box.x + box.width * x, box.y + y);
      // The tooltip's text starts with the marker's duration and name ("6.9msrequest ...").
      const text = await page.evaluate(() => document.querySelector('.tooltip')?.textContent ?? '');
      if (text.replace(/^[\d.,]+\s*[µmn]?s\s*/, '').startsWith(name)) return delay(300);
    }
  console.log(`no marker tooltip with ${name}`);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--window-size=1600,1000'],
});
let failed = 0;
try {
  for (const [name, fn] of Object.entries(scenarios)) {
    if (only.length && !only.includes(name)) continue;
    try {
      await fn(browser);
    } catch (e) {
      failed++;
      console.error(`${name}: ${e.stack ?? e}`);
    }
  }
} finally {
  await browser.close();
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
