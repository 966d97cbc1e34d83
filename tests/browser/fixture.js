// A supervised job's directory written the way gpuhost writes it, for the dashboard's browser
// test and render benchmark: journal.jsonl (doc/journal.md: "<length> <crc32> <json>\n" per
// record) and the metrics history (src/metrics/history.h: metrics/series.jsonl plus
// metrics/points.bin, 32-byte little-endian records {u32 id, u32 crc32 of the other 28 bytes,
// f64 time, f64 step (NaN = none), f64 value}). Node's standard library only.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

function journalTime(seconds) {
  return new Date(Math.round(seconds * 1000)).toISOString();  // "2026-11-30T20:13:14.123Z"
}

class JobWriter {
  constructor(root, name) {
    this.dir = path.join(root, name);
    this.metrics = path.join(this.dir, 'metrics');
    fs.mkdirSync(this.metrics, { recursive: true });
    this.journalPath = path.join(this.dir, 'journal.jsonl');
    this.seq = 0;
    this.series = new Map();  // name -> id
    fs.writeFileSync(this.journalPath, '');
    fs.writeFileSync(path.join(this.metrics, 'series.jsonl'), '');
    fs.writeFileSync(path.join(this.metrics, 'points.bin'), Buffer.alloc(0));
  }

  record(type, time, fields) {
    const json = JSON.stringify(Object.assign({ seq: ++this.seq, time: journalTime(time), type }, fields));
    const bytes = Buffer.from(json, 'utf8');
    const crc = (zlib.crc32(bytes) >>> 0).toString(16).padStart(8, '0');
    fs.appendFileSync(this.journalPath, bytes.length + ' ' + crc + ' ' + json + '\n');
  }

  // points: [{name, time, step (or null), value}], appended in one write.
  appendPoints(points, source = 'stdout') {
    const out = Buffer.alloc(points.length * 32);
    let lines = '';
    points.forEach((p, i) => {
      if (!this.series.has(p.name)) {
        const id = this.series.size;
        this.series.set(p.name, id);
        lines += JSON.stringify({ id, name: p.name, source }) + '\n';
      }
      const at = i * 32;
      out.writeUInt32LE(this.series.get(p.name), at);
      out.writeDoubleLE(p.time, at + 8);
      out.writeDoubleLE(p.step === null ? NaN : p.step, at + 16);
      out.writeDoubleLE(p.value, at + 24);
      const crc = zlib.crc32(Buffer.concat([out.subarray(at, at + 4), out.subarray(at + 8, at + 32)])) >>> 0;
      out.writeUInt32LE(crc, at + 4);
    });
    // A series' line goes to disk before its first point, as the writer does.
    if (lines) fs.appendFileSync(path.join(this.metrics, 'series.jsonl'), lines);
    fs.appendFileSync(path.join(this.metrics, 'points.bin'), out);
  }
}

// The loss a test trainer prints at step i: deterministic, noisy, decreasing.
function lossAt(i) {
  return 2.5 * Math.exp(-i / 400) + 0.05 * Math.sin(i * 0.7) + 0.1;
}

// A job with `steps` loss points (one per second from t0), checkpoints every `checkpointEvery`
// steps, one preemption notice and one restart; returns what was written.
function writeTrainingJob(root, name, { steps, t0 = 1767225600, checkpointEvery = 0, interval = 1 }) {
  const job = new JobWriter(root, name);
  const expected = { time: [], step: [], value: [], checkpoints: [], notices: [], restarts: [] };
  job.record('job_created', t0 - 2, { name, command: ['python3', 'train.py'], checkpoint_location: '/ckpt' });
  job.record('supervisor_started', t0 - 2, { pid: 100, cloud: 'none', after_crash: false });
  job.record('child_started', t0 - 1, { pid: 101, attempt: 1, run_token: 'a', command: ['python3', 'train.py'],
                                        resume_from: null, resume_path: '' });
  const batch = [];
  const flush = () => { if (batch.length) job.appendPoints(batch.splice(0)); };
  for (let i = 1; i <= steps; i++) {
    const time = t0 + i * interval;
    const value = lossAt(i);
    batch.push({ name: 'loss', time, step: i, value });
    expected.time.push(time);
    expected.step.push(i);
    expected.value.push(value);
    if (batch.length >= 65536) flush();
    if (checkpointEvery && i % checkpointEvery === 0) {
      flush();
      job.record('checkpoint_committed', time + 0.25, {
        path: '/ckpt/step-' + i + '.pt', snapshot: '', format: 'torch_zip', size_bytes: 1000 + i,
        content_hash: 'xxh3-128:' + String(i).padStart(32, '0'), step: i, modified: journalTime(time) });
      expected.checkpoints.push({ time: Math.round((time + 0.25) * 1000) / 1000, step: i });
    }
  }
  flush();
  const end = t0 + steps * interval;
  job.record('notice', end + 0.5, { source: 'drill', kind: 'preemption', deadline: journalTime(end + 120),
                                    detail: 'drill', event_id: 'drill-1' });
  expected.notices.push(Math.round((end + 0.5) * 1000) / 1000);
  job.record('child_exited', end + 0.75, { pid: 101, exit_code: 0, signaled: false, signal: 0,
                                          description: 'exited with code 0', ran_for_ms: 1000, cause: 'preempted' });
  job.record('child_started', end + 1, { pid: 102, attempt: 2, run_token: 'b', command: ['python3', 'train.py'],
                                        resume_from: null, resume_path: '' });
  expected.restarts.push(end + 1);
  return { job, expected };
}

module.exports = { JobWriter, lossAt, writeTrainingJob, journalTime };
