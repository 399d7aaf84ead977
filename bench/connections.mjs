#!/usr/bin/env node
// A thousand streaming clients at once: hone serve against llama-server (the
// peer, built from the same pinned tree), same model, same slots, same run.
//
// Issue 11's goal: 1,000 concurrent streaming clients, each either served or
// refused cleanly (429/503 with Retry-After) within 1 s, while /health answers
// in under 100 ms throughout.
//
// Each repetition starts both servers fresh (alternating which goes first),
// warms the model, then opens --clients streaming chat requests at once
// (one connection each) while a sampler GETs /health on a fresh connection
// every 50 ms. Per client: the time to its status line and the status. A
// client is "answered in 1 s" when its status line came within 1 s: a 200
// whose stream then runs, or a 429/503 carrying Retry-After (each client's
// clock starts when its connection is up; the clients run on 4 worker
// threads, the sampler on the main one). Resets,
// timeouts and statuses without Retry-After count against it.
//
// Reported per server and repetition: answered-within-1s share, statuses,
// status-line p50/p99, /health p50/p99/max; then the means ± 95% CI.
//
// Usage: node bench/connections.mjs [--model models/qwen2.5-0.5b.Q4_K_M.gguf]
//          [--clients 1000] [--reps 3] [--servers hone,llama-server] [--slots 4] [--threads 2] [--max-tokens 16] [--client-timeout 30]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { arg, pct, meanCi, sleep, freePort, peerServer } from './common.mjs';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const root = path.resolve(import.meta.dirname, '..');
const HONE = arg('hone', path.join(root, 'build/hone'));
const MODEL = path.resolve(arg('model', path.join(root, 'models/qwen2.5-0.5b.Q4_K_M.gguf')));
const CLIENTS = Number(arg('clients', 1000)), REPS = Number(arg('reps', 3));
const SLOTS = arg('slots', '4'), THREADS = arg('threads', '2'), MAX_TOKENS = Number(arg('max-tokens', 16));
const CLIENT_TIMEOUT_S = Number(arg('client-timeout', 30));  // a client still without a status line then is a timeout
// --servers hone: hone alone, for a quick check of a change (no ratio to the peer then).
const SERVERS = arg('servers', 'hone,llama-server').split(',');
if (!fs.existsSync(MODEL)) {
  console.error(`no model at ${MODEL}: run ./setup.sh or pass --model`);
  process.exit(1);
}
const LLAMA_SERVER = peerServer(SERVERS);


const children = new Set();
if (isMainThread) {
  process.on('exit', () => { for (const p of children) p.kill('SIGKILL'); });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));
}

async function start(kind) {
  const port = await freePort();
  const probePort = await freePort();  // hone's --probe-port: /health on its own workers
  const args = kind === 'hone'
    ? ['serve', '-m', MODEL, '--port', String(port), '--slots', SLOTS, '--threads', THREADS, '--quiet', 'true',
       '--probe-port', String(probePort)]
    : ['-m', MODEL, '--port', String(port), '-np', SLOTS, '-c', String(4096 * Number(SLOTS)), '-t', THREADS];
  const proc = spawn(kind === 'hone' ? HONE : LLAMA_SERVER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  let log = '';
  proc.stderr.on('data', (d) => { log = (log + d).slice(-20000); });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    if (proc.exitCode !== null) throw new Error(`${kind} exited:\n${log}`);
    const s = await health(url, 1000);
    if (s.status === 200) break;
    await sleep(100);
  }
  const probeUrl = kind === 'hone' ? `http://127.0.0.1:${probePort}` : null;
  return { kind, url, probeUrl, proc, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGKILL'); children.delete(proc); }) };
}

function health(url, timeout) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.get(url + '/health', { agent: false, timeout }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0 }));
    });
    req.on('timeout', () => { req.destroy(); resolve({ status: 'timeout', ms: performance.now() - t0 }); });
    req.on('error', () => resolve({ status: 'error', ms: performance.now() - t0 }));
  });
}

// One streaming chat client: time to the status line, then reads to the end.
// The clock starts when its connection is up: the load generator shares this
// machine's cores, and creating a thousand requests at once takes it a while.
function client(url, i) {
  const body = JSON.stringify({ model: path.basename(MODEL, '.gguf'), stream: true, max_tokens: MAX_TOKENS,
                                messages: [{ role: 'user', content: `Client ${i}: say hello in one sentence.` }] });
  let t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request(url + '/v1/chat/completions', {
      method: 'POST', agent: false, timeout: CLIENT_TIMEOUT_S * 1000, headers: { 'Content-Type': 'application/json' } }, (res) => {
      const got = { status: res.statusCode, retry: res.headers['retry-after'], headMs: performance.now() - t0 };
      req.setTimeout(0);  // answered: a queued stream may then wait for its slot
      res.on('data', () => {});
      res.on('end', () => resolve(got));
      res.on('error', () => resolve({ ...got, broken: true }));
    });
    req.on('socket', (sock) => sock.on('connect', () => { t0 = performance.now(); }));
    req.on('timeout', () => { req.destroy(); resolve({ status: 'timeout', headMs: performance.now() - t0 }); });
    req.on('error', (e) => resolve({ status: e.code || 'error', headMs: performance.now() - t0 }));
    req.end(body);
  });
}

// The clients run on worker threads, so the /health sampler on the main
// thread is never stalled behind them.
const WORKERS = 4;
if (!isMainThread) {
  const { url, from, to } = workerData;
  const results = await Promise.all(Array.from({ length: to - from }, (_, k) => client(url, from + k)));
  parentPort.postMessage(results);
  process.exit(0);
}
function clients(url) {
  const per = Math.ceil(CLIENTS / WORKERS);
  return Promise.all(Array.from({ length: WORKERS }, (_, w) => new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), {
      argv: process.argv.slice(2), workerData: { url, from: w * per, to: Math.min(CLIENTS, (w + 1) * per) } });
    worker.once('message', resolve);
    worker.once('error', reject);
  }))).then((parts) => parts.flat());
}

async function runOne(kind) {
  const s = await start(kind);
  try {
    await client(s.url, -1);  // the model is loaded and warm
    const samples = [], probeSamples = [];
    let sampling = true;
    const sample = async (url, into) => {
      while (sampling) {
        into.push(await health(url, 2000));
        await sleep(50);
      }
    };
    const samplers = [sample(s.url, samples)];
    if (s.probeUrl) samplers.push(sample(s.probeUrl, probeSamples));
    const results = await clients(s.url);
    sampling = false;
    await Promise.all(samplers);
    const clean = (r) => r.headMs <= 1000 && !r.broken &&
      (r.status === 200 || ((r.status === 429 || r.status === 503) && r.retry !== undefined));
    const statuses = {};
    for (const r of results) statuses[r.status] = (statuses[r.status] || 0) + 1;
    const hms = samples.map((h) => h.ms);
    return {
      kind, answered1s: results.filter(clean).length / CLIENTS, statuses,
      headP50: pct(results.map((r) => r.headMs), 0.5), headP99: pct(results.map((r) => r.headMs), 0.99),
      healthP50: pct(hms, 0.5), healthP99: pct(hms, 0.99), healthMax: Math.max(...hms),
      healthOk: samples.filter((h) => h.status === 200 && h.ms < 100).length / samples.length,
      probe: probeSamples.length ? {
        p50: pct(probeSamples.map((h) => h.ms), 0.5), p99: pct(probeSamples.map((h) => h.ms), 0.99),
        max: Math.max(...probeSamples.map((h) => h.ms)),
        ok: probeSamples.filter((h) => h.status === 200 && h.ms < 100).length / probeSamples.length,
      } : null,
    };
  } finally {
    await s.stop();
  }
}

const rows = [];
for (let rep = 0; rep < REPS; ++rep) {
  const order = (rep % 2 ? ['llama-server', 'hone'] : ['hone', 'llama-server']).filter((k) => SERVERS.includes(k));
  for (const kind of order) {
    const r = await runOne(kind);
    rows.push({ rep, ...r });
    console.error(`rep ${rep} ${kind}: answered in 1 s ${(100 * r.answered1s).toFixed(1)}% ${JSON.stringify(r.statuses)} ` +
                  `status line p50 ${r.headP50.toFixed(0)} ms p99 ${r.headP99.toFixed(0)} ms; ` +
                  `/health p50 ${r.healthP50.toFixed(1)} p99 ${r.healthP99.toFixed(1)} max ${r.healthMax.toFixed(0)} ms`);
  }
}

const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
let md = `# ${CLIENTS} streaming clients at once: hone serve vs llama-server\n\n`;
md += `Machine: ${cpu}, ${os.cpus().length} logical CPUs; model ${path.basename(MODEL)}; ${SLOTS} slots, ` +
      `${THREADS} threads, max_tokens ${MAX_TOKENS}, client timeout ${CLIENT_TIMEOUT_S} s; ${REPS} repetitions, order alternating; ${new Date().toISOString()}.\n` +
      `Command: \`node bench/connections.mjs ${process.argv.slice(2).join(' ')}\`\n\n`;
md += '/health is sampled every 50 ms on a fresh connection, on the API port and (hone) on its `--probe-port`, which has workers of its own.\n\n';
md += '| rep | server | answered in 1 s | statuses | status line p50 / p99 ms | /health p50 / p99 / max ms | /health < 100 ms | probe port /health p50 / p99 / max ms | probe port < 100 ms |\n|---|---|---|---|---|---|---|---|---|\n';
for (const r of rows) {
  md += `| ${r.rep} | ${r.kind} | ${f(100 * r.answered1s)}% | ${Object.entries(r.statuses).map(([k, v]) => `${k}: ${v}`).join(', ')} | ` +
        `${f(r.headP50, 0)} / ${f(r.headP99, 0)} | ${f(r.healthP50)} / ${f(r.healthP99)} / ${f(r.healthMax, 0)} | ${f(100 * r.healthOk)}% | ` +
        (r.probe ? `${f(r.probe.p50)} / ${f(r.probe.p99)} / ${f(r.probe.max, 0)} | ${f(100 * r.probe.ok)}% |\n` : 'n/a | n/a |\n');
}
md += '\n| server | answered in 1 s (mean ± 95% CI) | status line p99 ms | /health max ms | probe port /health max ms |\n|---|---|---|---|---|\n';
for (const kind of ['hone', 'llama-server'].filter((k) => SERVERS.includes(k))) {
  const mine = rows.filter((r) => r.kind === kind);
  const a = meanCi(mine.map((r) => 100 * r.answered1s)), p = meanCi(mine.map((r) => r.headP99)), h = meanCi(mine.map((r) => r.healthMax));
  const pm = mine.every((r) => r.probe) ? meanCi(mine.map((r) => r.probe.max)) : null;
  md += `| ${kind} | ${f(a.mean)}% ± ${f(a.ci95)} | ${f(p.mean, 0)} ± ${f(p.ci95, 0)} | ${f(h.mean, 0)} ± ${f(h.ci95, 0)} | ` +
        (pm ? `${f(pm.mean, 0)} ± ${f(pm.ci95, 0)} |\n` : 'n/a |\n');
}
const out = path.join(root, 'bench/results', `connections-vm-${new Date().toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-')}.md`);
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, md);
console.log(md);
console.error(`written to ${out}`);
