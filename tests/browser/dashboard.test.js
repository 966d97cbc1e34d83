// The dashboard in a real browser: `gpuhost serve` (the Linux build, or gpuhost.exe under Wine)
// on fixture jobs, Debian's Chromium driven headless by playwright-core (research/05 §7.1:
// executablePath /usr/bin/chromium, chromiumSandbox false as root, no extra flags). Checks that
// the loss chart holds exactly the points the trainer wrote, that markers are drawn, that live
// updates arrive, and that a token-protected server works from a browser. Saves screenshots to
// $GPUHOST_TEST_ARTIFACTS. Run by CTest (tests/CMakeLists.txt); by hand:
//   GPUHOST_BIN=build/linux/gpuhost node tests/browser/dashboard.test.js
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { JobWriter, writeTrainingJob, lossAt } = require('./fixture');

const BIN = process.env.GPUHOST_BIN;
const WINE = process.env.GPUHOST_WINE || '';
const CHROMIUM = process.env.GPUHOST_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.GPUHOST_TEST_ARTIFACTS || path.join(os.tmpdir(), 'gpuhost-test-artifacts');
const TMP = process.env.GPUHOST_TEST_TMP || os.tmpdir();
const SKIP = 77;  // CTest's SKIP_RETURN_CODE for this test

// Under CI=true a missing dependency fails the test, naming it (install-deps.sh installs them all).
const STRICT = ['1', 'true', 'yes'].includes((process.env.CI || '').toLowerCase());
function prerequisite(ok, what) {
  if (!ok) {
    console.log((STRICT ? 'FAIL: missing: ' : 'SKIP: missing: ') + what + ' (scripts/install-deps.sh installs it)' +
                (STRICT ? '; CI=true makes a missing dependency an error' : ''));
    process.exit(STRICT ? 1 : SKIP);
  }
}
prerequisite(BIN, 'GPUHOST_BIN is not set');
prerequisite(fs.existsSync(CHROMIUM), CHROMIUM + ' is missing');
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  prerequisite(false, 'playwright-core is not installed in tests/browser');
}

function hostPath(p) {
  return WINE && p.startsWith('/') ? 'Z:' + p.replace(/\//g, '\\') : p;
}

function fakeNvmlEnv() {
  const lib = process.env.GPUHOST_FAKE_NVML;
  const scenarios = process.env.GPUHOST_SCENARIOS;
  if (!lib || !scenarios) return {};
  return { GPUHOST_NVML_LIBRARY: hostPath(lib),
           GPUHOST_FAKE_NVML_SCENARIO: hostPath(path.join(scenarios, 'a100_sxm4_80gb_x8.json')) };
}

// `gpuhost serve --port 0 --json` in the background; resolves with its start line.
function startServe(jobsDir, extraArgs = []) {
  const args = ['serve', '--port', '0', '--json', '--jobs-dir', hostPath(jobsDir), ...extraArgs];
  const child = WINE ? spawn(WINE, [BIN, ...args], { env: { ...process.env, ...fakeNvmlEnv(), NO_COLOR: '1' } })
                     : spawn(BIN, args, { env: { ...process.env, ...fakeNvmlEnv(), NO_COLOR: '1' } });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('gpuhost serve printed nothing in 120 s: ' + stderr)), 120000);
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve({ child, info: JSON.parse(out.slice(0, nl)) });
      }
    });
    child.on('exit', (code) => reject(new Error('gpuhost serve exited ' + code + ': ' + stderr)));
  });
}

function stopServe(server) {
  if (!server || server.child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    server.child.on('exit', resolve);
    // Wine does not turn SIGTERM into a console event.
    server.child.kill(WINE ? 'SIGKILL' : 'SIGTERM');
  });
}

async function openDashboard(context, url) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('response', (r) => { if (r.status() >= 400) problems.push(r.status() + ' ' + r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => window.gpuhost && window.gpuhost.ready, null, { timeout: 60000 });
  return { page, problems };
}

// TensorBoard's debiased EMA, as research/05 §2.2 writes it.
function tensorboardEma(values, w) {
  let last = 0;
  let n = 0;
  return values.map((v) => {
    last = last * w + (1 - w) * v;
    n++;
    return last / (1 - Math.pow(w, n));
  });
}

// Node 0's journal of a two-node job (doc/run-multinode.md): it committed step 300, node 1 only
// step 200, so step 200 is on every node and node 1 is late.
function writeTwoNodeJob(root, name) {
  const job = new JobWriter(root, name);
  const t0 = 1767225600;
  job.record('job_created', t0, { name, command: ['torchrun', 'train.py'], checkpoint_location: '/ckpt' });
  job.record('supervisor_started', t0, { pid: 100, cloud: 'none', after_crash: false, topology: 'node 0 of 2 (torchrun)' });
  job.record('peers_started', t0 + 1, { role: 'leader', node: 0, nnodes: 2, leader: '127.0.0.1:29501' });
  job.record('peer_joined', t0 + 2, { node: 1 });
  job.record('resume_agreed', t0 + 2, { step: null, storage: 'node_local' });
  job.record('checkpoint_committed', t0 + 30, { path: '/ckpt/step-300.pt', snapshot: '', format: 'torch_zip',
                                                size_bytes: 100, content_hash: 'xxh3-128:1', step: 300, modified: '' });
  job.record('peer_committed', t0 + 31, { node: 1, step: 200 });
  job.record('global_commit', t0 + 31, { step: 200 });
}

fs.mkdirSync(TMP, { recursive: true });
const root = fs.mkdtempSync(path.join(TMP, 'gpuhost-dashboard-'));
const jobs = path.join(root, 'jobs');
let browser;
let server;
let fixture;

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  fixture = writeTrainingJob(jobs, 'mnist', { steps: 500, checkpointEvery: 100 });
  writeTrainingJob(jobs, 'big', { steps: 50000, checkpointEvery: 10000 });
  writeTwoNodeJob(jobs, 'ddp');
  server = await startServe(jobs);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: false });
});

after(async () => {
  if (browser) await browser.close();
  await stopServe(server);
  fs.rmSync(root, { recursive: true, force: true });
});

test('the loss chart holds exactly the points the trainer wrote, with its markers', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const { page, problems } = await openDashboard(context, server.info.dashboard + '?job=mnist&x=time');
  const state = await page.evaluate(() => {
    const g = window.gpuhost;
    return { job: g.job, errors: g.errors, series: g.series, markers: g.markers, names: Object.keys(g.charts),
             drawn: g.charts['train:loss'].drawnMarkers, gpus: g.gpus.gpus.length, stream: g.stream };
  });
  assert.deepEqual(state.errors, [], 'page errors (CSP violations included)');
  assert.deepEqual(problems, []);
  assert.equal(state.job, 'mnist');
  const loss = state.series.loss;
  assert.equal(loss.method, 'full');
  assert.deepEqual(loss.value, fixture.expected.value);
  assert.deepEqual(loss.time, fixture.expected.time);
  assert.deepEqual(loss.step, fixture.expected.step);
  assert.equal(state.markers.filter((m) => m.kind === 'checkpoint').length, 5);
  assert.deepEqual(state.markers.filter((m) => m.kind === 'checkpoint').map((m) => m.step), [100, 200, 300, 400, 500]);
  assert.equal(state.markers.filter((m) => m.kind === 'notice').length, 1);
  assert.equal(state.markers.filter((m) => m.kind === 'restart').length, 1);
  // Checkpoints 100..400 fall inside the loss chart's points (500 came after the last one, and
  // shows only when the axis happens to reach past it).
  assert.ok(state.drawn >= 4 && state.drawn <= 5, 'markers drawn: ' + state.drawn);
  // And a line of the checkpoint colour is really on the canvas at the first checkpoint.
  const hasLine = await page.evaluate(() => {
    const g = window.gpuhost;
    const u = g.charts['train:loss'].plot;
    const m = g.markers.find((k) => k.kind === 'checkpoint');
    const x = Math.round(u.valToPos(m.time, 'x', true));
    const { top, height } = u.bbox;
    const pixels = u.ctx.getImageData(x - 1, top, 3, height).data;
    for (let i = 0; i < pixels.length; i += 4)
      if (Math.abs(pixels[i] - 0x2a) < 24 && Math.abs(pixels[i + 1] - 0x9d) < 24 && Math.abs(pixels[i + 2] - 0x3f) < 24) return true;
    return false;
  });
  assert.ok(hasLine, 'no checkpoint-coloured pixels at the first checkpoint marker');
  assert.ok(state.names.includes('throughput'), 'no throughput chart: ' + state.names);
  if (Object.keys(fakeNvmlEnv()).length) {
    assert.equal(state.gpus, 8);  // the fake NVML's eight A100s
    for (const key of ['gpu:utilization_percent', 'gpu:memory_used_bytes', 'gpu:temperature_c', 'gpu:power_w'])
      assert.ok(state.names.includes(key), key);
  } else {
    // No NVML here: the GPU section says so instead of drawing empty charts.
    assert.match(await page.locator('#gpu-status').innerText(), /NVML|GPU/);
  }
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });

  // Live: the trainer goes on and commits another checkpoint; the page gets both by SSE.
  await page.waitForFunction(() => window.gpuhost.stream.open, null, { timeout: 30000 });
  const t0 = fixture.expected.time[fixture.expected.time.length - 1];
  const more = [];
  for (let i = 501; i <= 520; i++) more.push({ name: 'loss', time: t0 + 10 + (i - 500), step: i, value: lossAt(i) });
  fixture.job.appendPoints(more);
  fixture.job.record('checkpoint_committed', t0 + 40, { path: '/ckpt/step-520.pt', snapshot: '', format: 'torch_zip',
                                                        size_bytes: 1, content_hash: 'xxh3-128:0', step: 520, modified: '' });
  await page.waitForFunction(() => window.gpuhost.series.loss.value.length === 520 &&
                                   window.gpuhost.markers.filter((m) => m.kind === 'checkpoint').length === 6,
                             null, { timeout: 30000 });
  const live = await page.evaluate(() => window.gpuhost.series.loss);
  assert.deepEqual(live.value.slice(500), more.map((p) => p.value));
  assert.deepEqual(live.time.slice(500), more.map((p) => p.time));

  // Smoothing: TensorBoard's debiased EMA over the points.
  await page.locator('#smoothing').fill('0.9');
  await page.waitForFunction(() => window.gpuhost.smoothing === 0.9);
  const smoothed = await page.evaluate(() => window.gpuhost.series.loss.smoothed);
  const expected = tensorboardEma(live.value, 0.9);
  smoothed.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) <= 1e-12 * Math.abs(expected[i]), 'smoothed[' + i + ']'));

  // Step axis: the same points by step.
  await page.locator('#x-axis').selectOption('step');
  await page.waitForFunction(() => window.gpuhost.xMode === 'step' && window.gpuhost.charts['train:loss'] &&
                                   window.gpuhost.series.loss.step.length === 520, null, { timeout: 30000 });
  const byStep = await page.evaluate(() => window.gpuhost.series.loss);
  assert.deepEqual(byStep.step, fixture.expected.step.concat(more.map((p) => p.step)));
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-step-axis.png'), fullPage: true });
  await context.close();
});

test('a multi-node job shows the step every node has and which node is late', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const { page, problems } = await openDashboard(context, server.info.dashboard + '?job=ddp');
  await page.waitForFunction(() => document.getElementById('job-state').textContent.includes('node 1'), null,
                             { timeout: 30000 });
  const text = await page.locator('#job-state').innerText();
  assert.match(text, /1 checkpoint,/);
  assert.match(text, /all nodes: step 200/);
  assert.match(text, /node 0 step 300, node 1 step 200 \(late\)/);
  assert.deepEqual(problems, []);
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-two-nodes.png'), fullPage: true });
  await context.close();
});

test('a long history is downsampled by the server and keeps its ends', async () => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const { page, problems } = await openDashboard(context, server.info.dashboard + '?job=big&x=step');
  const loss = await page.evaluate(() => window.gpuhost.series.loss);
  assert.deepEqual(problems, []);
  assert.equal(loss.method, 'lttb');
  assert.equal(loss.total, 50000);
  assert.ok(loss.value.length <= 1400, String(loss.value.length));
  assert.equal(loss.step[0], 1);
  assert.equal(loss.step[loss.step.length - 1], 50000);
  assert.equal(loss.value[0], lossAt(1));
  assert.equal(loss.value[loss.value.length - 1], lossAt(50000));
  await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-50k.png'), fullPage: true });
  await context.close();
});

test('gpuhost run --dashboard shows what a real PyTorch trainer prints, live', { skip: WINE ? 'the Python trainer runs on Linux only' : !fs.existsSync('/usr/bin/python3') && !STRICT ? 'missing: /usr/bin/python3' : false }, async () => {
  // A real PyTorch trainer (Debian's python3-torch, under /usr/bin/python3):
  // tests/integration/trainers/torch_trainer.py prints "step N loss X" like a hand-written loop
  // and torch.save()s a checkpoint every 10 steps; gpuhost run reads the lines into the history.
  const trainer = path.join(__dirname, '..', 'integration', 'trainers', 'torch_trainer.py');
  const home = path.join(root, 'run-home');
  const out = path.join(root, 'run-ckpt');
  const child = spawn(BIN, ['run', '--name', 'live', '--cloud', 'none', '--settle', '0.2', '--checkpoints', out,
                            '--dashboard=127.0.0.1:0', '--', '/usr/bin/python3', trainer, '--steps', '60',
                            '--step-time', '0.15', '--every', '10', '--out', out],
                      { env: { ...process.env, GPUHOST_HOME: home, NO_COLOR: '1' } });
  const printed = new Map();  // step -> the loss text the trainer printed
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
    for (const m of stdout.matchAll(/^step (\d+) loss (\S+)$/gm)) printed.set(Number(m[1]), m[2]);
  });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "dashboard at" line in 60 s: ' + stderr)), 60000);
    child.stderr.on('data', (d) => {
      stderr += d;
      const m = /dashboard at (http:\/\/\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => reject(new Error('gpuhost run exited ' + code + ': ' + stderr)));
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const { page, problems } = await openDashboard(context, url + '?x=step');
    // Points and checkpoints keep arriving while the trainer runs.
    await page.waitForFunction(() => {
      const g = window.gpuhost;
      return g.series.loss && g.series.loss.value.length >= 25 && g.markers.some((m) => m.kind === 'checkpoint');
    }, null, { timeout: 60000 });
    const loss = await page.evaluate(() => window.gpuhost.series.loss);
    assert.deepEqual(problems, []);
    assert.equal(await page.evaluate(() => window.gpuhost.job), 'live');
    loss.step.forEach((step, i) => {
      assert.ok(printed.has(step), 'the page has step ' + step + ' the trainer never printed');
      assert.equal(loss.value[i], parseFloat(printed.get(step)), 'loss at step ' + step);
    });
    assert.deepEqual(loss.step, loss.step.map((_, i) => i + 1));
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-gpuhost-run.png'), fullPage: true });
    await context.close();
  } finally {
    if (child.exitCode === null) {
      await new Promise((resolve) => {
        child.on('exit', resolve);
        child.kill('SIGTERM');
      });
    }
  }
});

test('with a token, a browser gets in once by ?token= and the token stays out of the page', async () => {
  const tokenFile = path.join(root, 'token');
  const token = 'tok-' + Math.random().toString(36).slice(2);
  fs.writeFileSync(tokenFile, token + '\n');
  const guarded = await startServe(jobs, ['--token-file', hostPath(tokenFile)]);
  try {
    assert.ok(!JSON.stringify(guarded.info).includes(token));
    const context = await browser.newContext();
    const denied = await context.request.get(guarded.info.dashboard + 'api/jobs');
    assert.equal(denied.status(), 401);
    const { page, problems } = await openDashboard(context, guarded.info.dashboard + '?token=' + token + '&job=mnist');
    assert.deepEqual(problems, []);
    assert.ok(!page.url().includes(token), 'the token is still in the address bar: ' + page.url());
    const state = await page.evaluate(() => ({ errors: window.gpuhost.errors, points: window.gpuhost.series.loss.value.length,
                                              cookie: document.cookie, html: document.documentElement.outerHTML }));
    assert.deepEqual(state.errors, []);
    assert.ok(state.points >= 500);
    assert.ok(!state.cookie.includes(token), 'the cookie is readable by scripts');
    assert.ok(!state.html.includes(token));
    await page.waitForFunction(() => window.gpuhost.stream.open, null, { timeout: 30000 });
    const cookies = await context.cookies();
    const cookie = cookies.find((c) => c.name.startsWith('gpuhost_token_'));
    assert.ok(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', JSON.stringify(cookies));
    await context.close();
  } finally {
    await stopServe(guarded);
  }
});
