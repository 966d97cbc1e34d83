#!/usr/bin/env node
// Benchmark: time to first render of the dashboard for a job whose loss history holds 1,000,000
// points (target: under 1 s), in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core from tests/browser/node_modules). The span is from navigation start to the
// page's first complete render (window.gpuhost.timings.readyAt: every API answer in, every chart
// drawn, one animation frame later); it includes the server reading the series, downsampling it
// with LTTB for the chart's pixel width, and the JSON transfer.
//
// The anchor: a page that ships full resolution to the browser and lets uPlot draw every point
// (uPlot's own 150,000-points-in-90 ms case, research/05 §7.2), served by this script over
// loopback: navigation start to the first frame after fetching the 1,000,000 points as JSON,
// parsing them and drawing. For scale it also prints uPlot drawing points already in the page.
//
// Usage: node bench/dashboard_render.js [BUILD_DIR] [POINTS] [RUNS]   (default build/linux,
//        1000000, 5). Needs scripts/install-deps.sh (chromium, npm ci in tests/browser).
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const repo = path.resolve(__dirname, '..');
const { chromium } = require(path.join(repo, 'tests/browser/node_modules/playwright-core'));
const { writeTrainingJob, lossAt } = require(path.join(repo, 'tests/browser/fixture.js'));

const buildDir = path.resolve(process.argv[2] || path.join(repo, 'build/linux'));
const points = Number(process.argv[3] || 1000000);
const runs = Number(process.argv[4] || 5);
const bin = path.join(buildDir, 'gpuhost');
const uplot = path.join(repo, 'web/node_modules/uplot/dist/uPlot.iife.min.js');

function startServe(jobs) {
  const child = spawn(bin, ['serve', '--port', '0', '--json', '--jobs-dir', jobs], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve({ child, info: JSON.parse(out.slice(0, out.indexOf('\n'))) });
    });
    child.on('exit', (code) => reject(new Error('gpuhost serve exited ' + code)));
  });
}

function median(values) {
  const s = values.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main() {
  if (!fs.existsSync(bin)) throw new Error(bin + ' not found: build it first (cmake --build --preset linux)');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gpuhost-render-bench-'));
  let server;
  let browser;
  try {
    const started = Date.now();
    writeTrainingJob(path.join(root, 'jobs'), 'big', { steps: points, checkpointEvery: Math.max(1, Math.floor(points / 10)) });
    console.log(`fixture: ${points.toLocaleString()} loss points (${((points * 32) / 2 ** 20).toFixed(1)} MiB points.bin), ` +
                `10 checkpoints, written in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    server = await startServe(path.join(root, 'jobs'));
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, chromiumSandbox: false });

    const rows = [];
    for (let run = 0; run < runs + 1; run++) {  // the first run warms the server's page cache and is not counted
      const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      const page = await context.newPage();
      const t0 = Date.now();
      await page.goto(server.info.dashboard + '?job=big&x=step');
      await page.waitForFunction(() => window.gpuhost && window.gpuhost.ready, null, { timeout: 120000 });
      const wall = Date.now() - t0;
      const r = await page.evaluate(() => {
        const s = window.gpuhost.series.loss;
        const fetch = performance.getEntriesByType('resource').find((e) => e.name.includes('/series/loss'));
        return { readyAt: window.gpuhost.timings.readyAt, total: s.total, drawn: s.value.length, method: s.method,
                 seriesRequest: fetch ? fetch.duration : NaN, errors: window.gpuhost.errors };
      });
      if (r.errors.length) throw new Error('page errors: ' + r.errors.join('; '));
      if (run > 0) rows.push({ ...r, wall });
      await context.close();
    }
    const first = rows[0];
    console.log(`gpuhost dashboard: ${first.total.toLocaleString()} points, ${first.drawn} drawn (${first.method})`);
    console.log('  run  first render (ms)  series request (ms)  goto->ready in node (ms)');
    rows.forEach((r, i) => console.log(`  ${String(i + 1).padStart(3)}  ${r.readyAt.toFixed(0).padStart(17)}  ` +
                                       `${r.seriesRequest.toFixed(0).padStart(19)}  ${String(r.wall).padStart(24)}`));
    const ours = median(rows.map((r) => r.readyAt));

    // The anchor: every point to the page.
    const json = JSON.stringify({ step: Array.from({ length: points }, (_, i) => i + 1),
                                  value: Array.from({ length: points }, (_, i) => lossAt(i + 1)) });
    const page = '<!DOCTYPE html><html><head><script src="uPlot.iife.min.js"></script></head><body><div id="c"></div>' +
                 '<script src="anchor.js"></script></body></html>';
    const script = 'fetch("data.json").then((r) => r.json()).then((d) => {' +
                   ' new uPlot({ width: 660, height: 220, scales: { x: { time: false } }, series: [{}, { stroke: "red" }] },' +
                   ' [d.step, d.value], document.getElementById("c"));' +
                   ' requestAnimationFrame(() => { window.readyAt = performance.now(); }); });';
    const files = { '/': [page, 'text/html'], '/anchor.js': [script, 'text/javascript'],
                    '/uPlot.iife.min.js': [fs.readFileSync(uplot), 'text/javascript'], '/data.json': [json, 'application/json'] };
    const anchorServer = http.createServer((req, res) => {
      const [body, type] = files[req.url] || ['', 'text/plain'];
      res.writeHead(files[req.url] ? 200 : 404, { 'Content-Type': type, 'Cache-Control': 'no-store' });
      res.end(body);
    });
    await new Promise((resolve) => anchorServer.listen(0, '127.0.0.1', resolve));
    const anchor = [];
    for (let run = 0; run < runs + 1; run++) {
      const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      const p = await context.newPage();
      await p.goto('http://127.0.0.1:' + anchorServer.address().port + '/');
      await p.waitForFunction(() => window.readyAt !== undefined, null, { timeout: 120000 });
      if (run > 0) anchor.push(await p.evaluate(() => window.readyAt));
      await context.close();
    }
    anchorServer.close();
    const inPage = [];
    for (let run = 0; run < runs; run++) {
      const p = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await p.setContent('<!DOCTYPE html><html><body><div id="c"></div></body></html>');
      await p.addScriptTag({ path: uplot });
      inPage.push(await p.evaluate((n) => new Promise((resolve) => {
        const x = new Float64Array(n);
        const y = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          x[i] = i + 1;
          y[i] = Math.sin(i / 1000);
        }
        const t = performance.now();
        new uPlot({ width: 660, height: 220, scales: { x: { time: false } }, series: [{}, { stroke: 'red' }] },  // eslint-disable-line no-undef
                  [x, y], document.getElementById('c'));
        requestAnimationFrame(() => resolve(performance.now() - t));
      }), points));
      await p.close();
    }
    const theirs = median(anchor);
    console.log(`anchor, every point to the page (${(json.length / 2 ** 20).toFixed(1)} MiB of JSON): ` +
                anchor.map((v) => v.toFixed(0)).join(', ') + ' ms');
    console.log(`for scale, uPlot drawing ${points.toLocaleString()} points already in the page: ${median(inPage).toFixed(0)} ms (median)`);
    console.log(`median first render: gpuhost ${ours.toFixed(0)} ms (target < 1000 ms: ${ours < 1000 ? 'met' : 'NOT met'}); ` +
                `anchor ${theirs.toFixed(0)} ms; anchor / gpuhost = ${(theirs / ours).toFixed(2)}`);
    console.log(`host: ${os.cpus().length} CPUs (${os.cpus()[0].model}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ` +
                `Chromium ${browser.version()}`);
  } finally {
    if (browser) await browser.close();
    if (server) server.child.kill('SIGTERM');
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error('dashboard_render: ' + e.message);
  process.exit(1);
});
