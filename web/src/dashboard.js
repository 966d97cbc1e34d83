// The gpuhost dashboard: one page served by `gpuhost serve` / `gpuhost run --dashboard`, drawn
// with uPlot, fed by the JSON API and the Server-Sent Events stream of src/telemetry/dashboard.h
// (doc/dashboard.md). No build step, no framework, nothing from outside this server (the page's
// Content-Security-Policy allows nothing else).
'use strict';

(() => {
  const COLORS = ['#1f6feb', '#d9480f', '#2f9e44', '#ae3ec9', '#e8590c', '#0c8599', '#5c940d', '#c2255c'];
  const MARKER_COLORS = { checkpoint: '#2a9d3f', notice: '#e08a00', restart: '#d62828' };
  const THROUGHPUT = /(per_?sec(ond)?|_per_s\b|\/s$|samples_?per|tokens_?per|it\/s|throughput|fps|img\/s)/i;
  const GPU_KEEP = 900;  // samples, as the server's sampler keeps

  // Everything the page holds, for people in the console and for the browser test
  // (tests/browser/): the points each chart draws are exactly what the server sent.
  const state = window.gpuhost = {
    ready: false,          // the first full render is done
    job: null,
    xMode: 'step',
    smoothing: 0.6,
    jobs: [],
    series: {},            // name -> {time, step, value, smoothed, method, total, points, lastTime}
    charts: {},            // chart key -> {plot, drawnMarkers}
    markers: [],           // {kind, time, step, summary}
    checkpoints: [],
    events: [],
    gpus: null,            // the /api/gpus answer, extended by the stream
    stream: { open: false, messages: 0, lastEventId: null, reconnects: 0 },
    timings: {},           // ms since navigation start: readyAt
    errors: [],
  };

  const $ = (id) => document.getElementById(id);
  let source = null;
  let generation = 0;  // bumped when the job or x axis changes: late answers of the old one are dropped
  const refetchTimers = {};

  // ---- data ------------------------------------------------------------------------------

  async function api(path) {
    const response = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
    if (response.status === 401) {
      showNotice('This server requires a token: open this page once as /?token=TOKEN ' +
                 '(the browser then keeps it in a cookie).');
      throw new Error('unauthorized');
    }
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  // TensorBoard's smoothing (webapp/widgets/line_chart_v2/data_transformer.ts, classicSmoothing):
  // a debiased exponential moving average over the finite values; a constant series is kept.
  function ema(values, weight) {
    const out = values.slice();
    if (values.length === 0 || values.every((v) => v === values[0])) return out;
    let last = 0;
    let n = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v === null || !Number.isFinite(v)) continue;
      last = last * weight + (1 - weight) * v;
      n++;
      out[i] = weight === 1 ? last : last / (1 - Math.pow(weight, n));
    }
    return out;
  }

  // The pixel width of one chart in a grid of cards: the grid's first column, less the card's
  // padding and border.
  function chartWidth(container) {
    const first = parseFloat(getComputedStyle(container).gridTemplateColumns);
    const column = Number.isFinite(first) && first > 0 ? first : container.clientWidth || 600;
    return Math.max(300, Math.floor(column - 18));
  }

  function seriesUrl(name, width, withSmoothing) {
    let url = 'api/job/' + encodeURIComponent(state.job) + '/series/' + encodeURIComponent(name) +
              '?width=' + width + '&x=' + state.xMode;
    if (withSmoothing) url += '&smooth=' + state.smoothing;
    return url;
  }

  async function fetchSeries(name, width) {
    // Downsampled, the server's smoothing is the one to draw: it runs over every point, not just
    // the drawn ones. At full resolution the page smooths itself, so the slider needs no request.
    const s = await api(seriesUrl(name, width, state.smoothing > 0));
    return {
      time: s.time, step: s.step, value: s.value,
      smoothed: s.method === 'full' || !s.smoothed ? ema(s.value, state.smoothing) : s.smoothed,
      method: s.method, total: s.total, points: s.points, lastTime: s.last_time, width,
    };
  }

  // ---- charts ----------------------------------------------------------------------------

  function markersPlugin(key, markersFor) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          const { left, top, width, height } = u.bbox;
          const dpr = window.devicePixelRatio || 1;
          let drawn = 0;
          ctx.save();
          ctx.lineWidth = 1.5 * dpr;
          ctx.setLineDash([5 * dpr, 4 * dpr]);
          for (const m of markersFor()) {
            if (m.x === null || m.x === undefined || !Number.isFinite(m.x)) continue;
            const px = u.valToPos(m.x, 'x', true);
            if (px < left - 0.5 || px > left + width + 0.5) continue;
            ctx.strokeStyle = MARKER_COLORS[m.kind];
            ctx.beginPath();
            ctx.moveTo(px, top);
            ctx.lineTo(px, top + height);
            ctx.stroke();
            drawn++;
          }
          ctx.restore();
          if (state.charts[key]) state.charts[key].drawnMarkers = drawn;
        }],
      },
    };
  }

  // Marker positions on a chart's x axis: its time, or in step mode the step the trainer was at
  // (a checkpoint's own step when the journal has it).
  function markerXs(reference) {
    return state.markers.map((m) => ({ kind: m.kind, x: state.xMode === 'time' ? m.time : (m.step ?? stepAt(reference, m.time)) }));
  }

  function stepAt(s, time) {
    if (!s || !s.time.length) return null;
    let best = null;
    for (let i = 0; i < s.time.length; i++) {
      if (s.time[i] <= time && s.step[i] !== null && (best === null || s.time[i] >= s.time[best])) best = i;
    }
    return best === null ? null : s.step[best];
  }

  function makeCard(container, title, note) {
    const card = document.createElement('div');
    card.className = 'chart';
    const h = document.createElement('h3');
    h.textContent = title;
    const span = document.createElement('span');
    span.className = 'note';
    span.textContent = note || '';
    h.appendChild(span);
    const plot = document.createElement('div');
    plot.className = 'plot';
    card.append(h, plot);
    container.appendChild(card);
    return { card, plot, note: span };
  }

  // Tick labels with at most four significant digits (uPlot's own repeat "0.001" for ticks 0.0005
  // apart) and exponents for tiny or huge values (learning rates).
  function tickLabel(v) {
    if (v === null || v === undefined) return '';
    const a = Math.abs(v);
    if (a === 0) return '0';
    if (a >= 1e6 || a < 1e-3) return v.toExponential(1);
    return String(Number(v.toPrecision(4)));
  }

  function plotOptions(key, container, yLabel, lines, timeAxis, markersFor) {
    return {
      width: chartWidth(container),
      height: 220,
      scales: { x: { time: timeAxis } },
      series: [{ label: timeAxis ? 'time' : 'step' }].concat(lines),
      axes: [{}, { label: yLabel, size: 64, values: (u, ticks) => ticks.map(tickLabel) }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      plugins: [markersPlugin(key, markersFor)],
    };
  }

  function noteOf(s) {
    if (s.method === 'full') return s.total + ' points';
    return s.total.toLocaleString() + ' points, ' + s.value.length + ' drawn (' + s.method.replace('_', '-') + ')';
  }

  function trainingData(s) {
    const x = state.xMode === 'time' ? s.time : s.step;
    return [x, s.value, s.smoothed];
  }

  function drawTrainingChart(name, s) {
    const key = 'train:' + name;
    const container = $(THROUGHPUT.test(name) ? 'throughput-charts' : 'training-charts');
    const { plot, note } = makeCard(container, name, noteOf(s));
    const color = COLORS[Object.keys(state.charts).length % COLORS.length];
    const lines = [
      { label: name, stroke: color + '55', width: 1 },
      { label: 'smoothed', stroke: color, width: 2, show: state.smoothing > 0 },
    ];
    state.charts[key] = { drawnMarkers: 0, note, series: name };
    const opts = plotOptions(key, container, name, lines, state.xMode === 'time', () => markerXs(s));
    state.charts[key].plot = new uPlot(opts, trainingData(s), plot);
  }

  // Steps per second between consecutive points of the series with the most steps, when the
  // trainer reports no throughput of its own.
  function derivedThroughput() {
    let best = null;
    for (const [name, s] of Object.entries(state.series)) {
      const n = s.step.filter((v) => v !== null).length;
      if (n >= 2 && (best === null || n > best.n)) best = { name, s, n };
    }
    if (!best) return null;
    const s = best.s;
    const order = s.time.map((_, i) => i).filter((i) => s.step[i] !== null).sort((a, b) => s.time[a] - s.time[b]);
    const x = [];
    const y = [];
    for (let k = 1; k < order.length; k++) {
      const a = order[k - 1];
      const b = order[k];
      const dt = s.time[b] - s.time[a];
      const ds = s.step[b] - s.step[a];
      if (!(dt > 0) || !(ds > 0)) continue;  // a restart goes back in steps
      x.push(state.xMode === 'time' ? s.time[b] : s.step[b]);
      y.push(ds / dt);
    }
    if (state.xMode === 'step') {
      const idx = x.map((_, i) => i).sort((a, b) => x[a] - x[b]);
      return { source: best.name, x: idx.map((i) => x[i]), y: idx.map((i) => y[i]), reference: s };
    }
    return { source: best.name, x, y, reference: s };
  }

  function drawDerivedThroughput() {
    const container = $('throughput-charts');
    const existing = state.charts.throughput;
    const d = derivedThroughput();
    if (!d) {
      if (existing) {
        existing.plot.destroy();
        existing.plot.root.parentElement.parentElement.remove();
        delete state.charts.throughput;
      }
      return;
    }
    if (existing) {
      existing.reference = d.reference;
      existing.plot.setData([d.x, d.y]);
      return;
    }
    const { plot } = makeCard(container, 'steps per second', 'from ' + d.source);
    state.charts.throughput = { drawnMarkers: 0, reference: d.reference };
    const opts = plotOptions('throughput', container, 'steps/s', [{ label: 'steps/s', stroke: '#495057', width: 1.5 }],
                             state.xMode === 'time', () => markerXs(state.charts.throughput.reference));
    state.charts.throughput.plot = new uPlot(opts, [d.x, d.y], plot);
  }

  const GPU_CHARTS = [
    { key: 'utilization_percent', title: 'GPU utilisation', unit: '%', scale: 1 },
    { key: 'memory_used_bytes', title: 'GPU memory used', unit: 'GiB', scale: 1 / 2 ** 30 },
    { key: 'temperature_c', title: 'GPU temperature', unit: '°C', scale: 1 },
    { key: 'power_w', title: 'GPU power', unit: 'W', scale: 1 },
  ];

  function gpuData(chart) {
    const g = state.gpus;
    const columns = g[chart.key] || [];
    return [g.time].concat(columns.map((col) => col.map((v) => (v === null ? null : v * chart.scale))));
  }

  function drawGpuCharts() {
    const g = state.gpus;
    const status = $('gpu-status');
    const count = Math.max(g.gpus.length, (g.utilization_percent || []).length);
    if (!g.available || count === 0) {
      status.hidden = false;
      status.textContent = g.available ? 'No NVIDIA GPU found.' : 'NVML is not available here' + (g.error ? ': ' + g.error : '.');
    } else {
      status.hidden = true;
    }
    for (const chart of GPU_CHARTS) {
      const key = 'gpu:' + chart.key;
      const existing = state.charts[key];
      if (existing && existing.gpuCount === count) {
        existing.plot.setData(gpuData(chart));
        continue;
      }
      if (existing) {
        existing.plot.destroy();
        existing.card.remove();
      }
      if (count === 0) {
        delete state.charts[key];
        continue;
      }
      const container = $('gpu-charts');
      const names = [...new Set(g.gpus.map((info) => info.name).filter(Boolean))];
      const { card, plot } = makeCard(container, chart.title, chart.unit + (names.length ? ', ' + names.join(', ') : ''));
      const lines = [];
      for (let i = 0; i < count; i++) {
        const info = g.gpus[i];
        lines.push({ label: 'GPU ' + i, stroke: COLORS[i % COLORS.length], width: 1.5 });
      }
      state.charts[key] = { drawnMarkers: 0, gpuCount: count, card };
      const timeMarkers = () => state.markers.map((m) => ({ kind: m.kind, x: m.time }));
      const opts = plotOptions(key, container, chart.unit, lines, true, timeMarkers);
      state.charts[key].plot = new uPlot(opts, gpuData(chart), plot);
    }
  }

  function appendGpuFrames(update) {
    const g = state.gpus;
    if (!g) return;
    if (update.gpus.length) g.gpus = update.gpus;
    g.available = update.available;
    g.error = update.error;
    g.time = g.time.concat(update.time);
    for (const chart of GPU_CHARTS) {
      const old = g[chart.key] || [];
      const add = update[chart.key] || [];
      const n = Math.max(old.length, add.length);
      const merged = [];
      for (let i = 0; i < n; i++) {
        const before = old[i] || new Array(g.time.length - update.time.length).fill(null);
        merged.push(before.concat(add[i] || new Array(update.time.length).fill(null)));
      }
      g[chart.key] = merged;
    }
    const extra = g.time.length - GPU_KEEP;
    if (extra > 0) {
      g.time = g.time.slice(extra);
      for (const chart of GPU_CHARTS) g[chart.key] = g[chart.key].map((col) => col.slice(extra));
    }
    drawGpuCharts();
  }

  // ---- the job ---------------------------------------------------------------------------

  function applyJob(job) {
    const count = (n, word) => n + ' ' + word + (n === 1 ? '' : 's');
    // The job's detail lists its checkpoints; the job list and live updates give their number.
    const committed = Array.isArray(job.checkpoints) ? job.checkpoints.filter((c) => c.status === 'committed').length
                                                     : job.checkpoints;
    let phase = job.phase + (job.last_step !== null ? ', step ' + job.last_step : '') +
                ', ' + count(committed, 'checkpoint') + ', ' + count(job.restarts, 'restart') +
                ', ' + count(job.preemptions, 'preemption');
    // A multi-node job: the step every node has, and on node 0 which node is behind or gone.
    if (job.global_step !== null && job.global_step !== undefined) phase += '; all nodes: step ' + job.global_step;
    if (job.nodes && job.nodes.length > 1 && job.nodes.some((n) => n.self && n.node === 0)) {
      const node = (n) => 'node ' + n.node + ' ' + (n.step === null ? 'no step yet' : 'step ' + n.step) +
                          (n.state !== 'joined' ? ' (' + n.state + ')' : '') + (n.late ? ' (late)' : '');
      phase += '; ' + job.nodes.map(node).join(', ');
    }
    $('job-state').textContent = phase;
  }

  function addEvents(events) {
    for (const e of events) {
      if (state.events.some((known) => known.index === e.index)) continue;
      state.events.push(e);
      if (e.marker) {
        let step = null;
        if (e.marker === 'checkpoint') {
          const c = state.checkpoints.find((ck) => ck.time === e.time);
          if (c) step = c.step;
        }
        state.markers.push({ kind: e.marker, time: e.time, step, summary: e.summary });
      }
      const li = document.createElement('li');
      if (e.marker) li.className = e.marker;
      const t = document.createElement('time');
      t.textContent = Number.isFinite(e.time) ? new Date(e.time * 1000).toLocaleString() : '';
      li.append(t, document.createTextNode(e.summary || e.type));
      $('events').prepend(li);
    }
  }

  function redrawAll() {
    for (const chart of Object.values(state.charts)) chart.plot.redraw(false, false);
  }

  function clearCharts() {
    for (const chart of Object.values(state.charts)) chart.plot.destroy();
    state.charts = {};
    for (const id of ['training-charts', 'throughput-charts', 'gpu-charts']) $(id).replaceChildren();
  }

  async function loadTraining(myGeneration) {
    const list = await api('api/job/' + encodeURIComponent(state.job) + '/series');
    if (myGeneration !== generation) return;
    const names = list.series.map((s) => s.name);  // the server's order: loss first
    $('no-series').hidden = names.length > 0;
    const width = chartWidth($('training-charts'));
    const loaded = await Promise.all(names.map((name) => fetchSeries(name, width)));
    if (myGeneration !== generation) return;
    for (const key of Object.keys(state.charts)) {
      if (key.startsWith('train:') || key === 'throughput') {
        state.charts[key].plot.destroy();
        delete state.charts[key];
      }
    }
    $('training-charts').replaceChildren();
    $('throughput-charts').replaceChildren();
    state.series = {};
    names.forEach((name, i) => {
      state.series[name] = loaded[i];
      drawTrainingChart(name, loaded[i]);
    });
    if (!names.some((n) => THROUGHPUT.test(n))) drawDerivedThroughput();
  }

  async function loadJob(name) {
    const myGeneration = ++generation;
    closeStream();
    clearCharts();
    state.job = name;
    state.series = {};
    state.markers = [];
    state.events = [];
    $('events').replaceChildren();
    if (!name) {
      $('no-series').hidden = false;
      return;
    }
    const [detail, gpus] = await Promise.all([api('api/job/' + encodeURIComponent(name)), api('api/gpus'),
                                              loadTraining(myGeneration)]);
    if (myGeneration !== generation) return;
    state.checkpoints = detail.checkpoints;
    applyJob(detail);
    addEvents(detail.events);
    state.gpus = gpus;
    drawGpuCharts();
    redrawAll();  // the markers arrived after the training charts were drawn
    openStream();
  }

  // ---- live updates ----------------------------------------------------------------------

  function closeStream() {
    if (source) source.close();
    source = null;
    setLive('connecting', '');
  }

  function setLive(text, cls) {
    const live = $('live');
    live.textContent = text;
    live.className = 'live ' + cls;
  }

  function newestPointTime() {
    let t = -Infinity;
    for (const s of Object.values(state.series)) if (Number.isFinite(s.lastTime)) t = Math.max(t, s.lastTime);
    return t;
  }

  function openStream() {
    const myGeneration = generation;
    let url = 'api/stream?events=' + state.events.length;
    if (state.job) url += '&job=' + encodeURIComponent(state.job);
    const since = newestPointTime();
    if (Number.isFinite(since)) url += '&since=' + since;
    if (state.gpus && state.gpus.time.length) url += '&gpu_since=' + state.gpus.time[state.gpus.time.length - 1];
    source = new EventSource(url);
    source.onopen = () => {
      state.stream.open = true;
      setLive('live', 'on');
    };
    source.onerror = () => {
      state.stream.open = false;
      if (source && source.readyState === EventSource.CLOSED) {
        // Refused (e.g. 503: too many streams): try again with a fresh cursor.
        setLive('offline', 'off');
        source = null;
        setTimeout(() => { if (myGeneration === generation && !source) openStream(); }, 5000);
      } else {
        state.stream.reconnects++;
        setLive('reconnecting', 'off');
      }
    };
    const track = (e) => {
      state.stream.messages++;
      state.stream.lastEventId = e.lastEventId;
      return JSON.parse(e.data);
    };
    source.addEventListener('gpu', (e) => appendGpuFrames(track(e)));
    source.addEventListener('job', (e) => {
      const job = track(e);
      applyJob(job);
      const hadMarkers = state.markers.length;
      addEvents(job.events);
      if (state.markers.length !== hadMarkers) {
        // A new checkpoint's step comes with the job's checkpoint list.
        api('api/job/' + encodeURIComponent(state.job)).then((d) => {
          state.checkpoints = d.checkpoints;
          for (const m of state.markers) {
            if (m.kind === 'checkpoint' && m.step === null) {
              const c = d.checkpoints.find((ck) => ck.time === m.time);
              if (c) m.step = c.step;
            }
          }
          redrawAll();
        }).catch(() => {});
      }
    });
    source.addEventListener('points', (e) => appendPoints(track(e), myGeneration));
  }

  function scheduleRefetch(name, delay) {
    if (refetchTimers[name]) return;
    const myGeneration = generation;
    refetchTimers[name] = setTimeout(async () => {
      delete refetchTimers[name];
      if (myGeneration !== generation) return;
      if (!state.series[name]) {
        await loadTraining(myGeneration);  // a new series: new chart
        return;
      }
      const s = await fetchSeries(name, state.series[name].width);
      if (myGeneration !== generation || !state.series[name]) return;
      state.series[name] = s;
      updateChart(name);
    }, delay);
  }

  function updateChart(name) {
    const chart = state.charts['train:' + name];
    const s = state.series[name];
    if (!chart || !s) return;
    chart.plot.setData(trainingData(s));
    chart.note.textContent = noteOf(s);
    if (state.charts.throughput) drawDerivedThroughput();
  }

  function appendPoints(update, myGeneration) {
    if (myGeneration !== generation) return;
    for (const name of update.reload) scheduleRefetch(name, 0);
    for (const [name, add] of Object.entries(update.series)) {
      const s = state.series[name];
      if (!s) {
        scheduleRefetch(name, 0);
        continue;
      }
      let needsRefetch = false;
      for (let i = 0; i < add.time.length; i++) {
        if (state.xMode === 'step') {
          const last = s.step.length ? s.step[s.step.length - 1] : null;
          // A step not after the last one: the trainer went back (resumed): the server decides
          // which points survive.
          if (add.step[i] === null || (last !== null && add.step[i] <= last)) {
            needsRefetch = true;
            continue;
          }
        }
        s.time.push(add.time[i]);
        s.step.push(add.step[i]);
        s.value.push(add.value[i]);
        s.total++;
        s.points++;
        if (add.time[i] > s.lastTime || !Number.isFinite(s.lastTime)) s.lastTime = add.time[i];
      }
      if (s.method === 'full') {
        s.smoothed = ema(s.value, state.smoothing);
        if (s.value.length > 2 * s.width) needsRefetch = true;  // time to downsample
      } else {
        // Continue the server's smoothing for the new points until the next fetch.
        while (s.smoothed.length < s.value.length) {
          const i = s.smoothed.length;
          const prev = s.smoothed[i - 1];
          const v = s.value[i];
          s.smoothed.push(prev === null || prev === undefined || v === null ? v : prev * state.smoothing + (1 - state.smoothing) * v);
        }
        needsRefetch = true;
      }
      updateChart(name);
      if (needsRefetch) scheduleRefetch(name, s.method === 'full' ? 500 : 3000);
    }
  }

  // ---- controls --------------------------------------------------------------------------

  let smoothingTimer = null;
  function setSmoothing(weight) {
    state.smoothing = weight;
    $('smoothing-value').textContent = weight.toFixed(2);
    for (const [name, s] of Object.entries(state.series)) {
      const chart = state.charts['train:' + name];
      if (s.method === 'full') {
        s.smoothed = ema(s.value, weight);
        if (chart) {
          chart.plot.setSeries(2, { show: weight > 0 });
          chart.plot.setData(trainingData(s));
        }
      }
    }
    clearTimeout(smoothingTimer);
    smoothingTimer = setTimeout(() => {
      for (const [name, s] of Object.entries(state.series)) {
        if (s.method !== 'full') scheduleRefetch(name, 0);
        const chart = state.charts['train:' + name];
        if (chart) chart.plot.setSeries(2, { show: weight > 0 });
      }
    }, 150);
  }

  function showNotice(text) {
    const n = $('banner');
    n.textContent = text;
    n.hidden = false;
  }

  function reportError(error) {
    state.errors.push(String(error && error.message ? error.message : error));
    if (String(error.message) !== 'unauthorized') showNotice('Error: ' + (error.message || error));
  }

  async function start() {
    const params = new URLSearchParams(location.search);
    if (params.get('x') === 'time' || params.get('x') === 'step') state.xMode = params.get('x');
    $('x-axis').value = state.xMode;
    if (params.has('smoothing')) {
      const w = Number(params.get('smoothing'));
      if (w >= 0 && w <= 0.99) state.smoothing = w;
    }
    $('smoothing').value = state.smoothing;
    $('smoothing-value').textContent = state.smoothing.toFixed(2);

    const list = await api('api/jobs');
    state.jobs = list.jobs;
    const picker = $('job');
    for (const job of list.jobs) {
      const option = document.createElement('option');
      option.value = job.name;
      option.textContent = job.name + ' (' + job.phase + ')';
      picker.appendChild(option);
    }
    const wanted = params.get('job');
    const running = list.jobs.find((j) => j.phase === 'running');
    const chosen = list.jobs.some((j) => j.name === wanted) ? wanted : (running || list.jobs[0] || {}).name || null;
    if (chosen) picker.value = chosen;
    picker.addEventListener('change', () => loadJob(picker.value).catch(reportError));
    $('x-axis').addEventListener('change', (e) => {
      state.xMode = e.target.value;
      loadJob(state.job).catch(reportError);
    });
    $('smoothing').addEventListener('input', (e) => setSmoothing(Number(e.target.value)));
    window.addEventListener('resize', () => {
      for (const chart of Object.values(state.charts)) {
        const container = chart.plot.root.parentElement.parentElement.parentElement;
        chart.plot.setSize({ width: chartWidth(container), height: 220 });
      }
    });

    if (!chosen) {
      $('no-series').hidden = false;
      state.gpus = await api('api/gpus');
      drawGpuCharts();
      openStream();
    } else {
      await loadJob(chosen);
    }
    requestAnimationFrame(() => {
      state.timings.readyAt = performance.now();
      state.ready = true;
    });
  }

  document.addEventListener('securitypolicyviolation', (e) => state.errors.push('CSP: ' + e.violatedDirective));
  start().catch((error) => {
    reportError(error);
    state.ready = true;
  });
})();
