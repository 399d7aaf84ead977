#!/usr/bin/env node
// Response cache: the support-chat workload with 30% exact repeats (a
// request repeats an earlier one, as customers ask the same FAQ), greedy,
// streamed, 8 clients, through a hone route to a simulated cloud
// (tests/node/fake_upstream.mjs: TTFT 300 ms, 60 tok/s, timers only). Two
// servers in the same run, cache off and cache on; the same request sequence
// for both; 3 repetitions, alternating which goes first. Reports TTFT p50/p99
// and the cloud spend from the ledger (/hone/spend), with ratios on/off.
//
// Usage: node bench/cache.mjs [--requests 200] [--reps 3]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeUpstream } from '../tests/node/fake_upstream.mjs';

const root = path.resolve(import.meta.dirname, '..');
const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
const HONE = arg('hone', path.join(root, 'build/hone'));
const N = Number(arg('requests', 200)), REPS = Number(arg('reps', 3)), CLIENTS = 8, REPEAT = 0.3;
const SYSTEM = 'You are the support assistant of a web shop. Answer politely in two or three sentences.';
const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const meanCi = (xs) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1));
  const t = [0, 12.71, 4.30, 3.18, 2.78, 2.57][xs.length - 1] ?? 1.96;
  return { mean: m, ci95: (t * sd) / Math.sqrt(xs.length) };
};

function sequence(seed) {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  const out = [];
  for (let i = 0; i < N; ++i) out.push(i > 0 && rand() < REPEAT ? out[Math.floor(rand() * i)] : `Order ${seed}-${i}: where is my parcel?`);
  return out;
}

async function serve(cache, upUrl) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-cachebench-'));
  const toml = [`state_dir = "${tmp}/state"`, ...(cache ? ['[cache]', 'max_bytes = "64M"', 'ttl = "1h"'] : []),
    '[[upstream]]', 'name = "cloud"', `base_url = "${upUrl}/v1"`, 'health_interval = "1h"', 'max_concurrent = 64',
    'price_input_per_m = 0.15', 'price_output_per_m = 0.60',
    '[[route]]', 'name = "support"', 'targets = ["cloud:support-large"]', 'policy = "failover"'].join('\n');
  fs.writeFileSync(path.join(tmp, 'hone.toml'), toml);
  const proc = spawn(HONE, ['serve', '--config', path.join(tmp, 'hone.toml'), '--port', '0', '--quiet', 'true', '--models', tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => { log += d; const m = /listening on (http:\/\/\S+)/.exec(log); if (m) resolve(m[1]); });
    proc.on('exit', (c) => reject(new Error('hone serve exited ' + c + '\n' + log)));
  });
  return { url, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGTERM'); }), tmp };
}

async function ask(url, q) {
  const t0 = performance.now();
  const res = await fetch(url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'support', stream: true, temperature: 0, max_tokens: 64,
      messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: q }] }) });
  const reader = res.body.getReader();
  let ttft = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (ttft === null && new TextDecoder().decode(value).includes('"content":"')) ttft = (performance.now() - t0) / 1000;
  }
  return { ttft, hit: res.headers.get('x-hone-cache') === 'hit' };
}

async function runOne(cache, seq, up) {
  const s = await serve(cache, up.url);
  // Warm-up, not counted: every client's connection and the upstream's.
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => ask(s.url, `warm-up ${i} ${Math.random()}`)));
  const before = (await (await fetch(s.url + '/hone/spend')).json()).total;
  const ttfts = [], hitTtfts = [];
  let next = 0, hits = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < seq.length) {
      const r = await ask(s.url, seq[next++]);
      ttfts.push(r.ttft);
      if (r.hit) hitTtfts.push(r.ttft);
      hits += r.hit;
    }
  }));
  const spend = await (await fetch(s.url + '/hone/spend')).json();
  await s.stop();
  fs.rmSync(s.tmp, { recursive: true, force: true });
  return { p50: pct(ttfts, 0.5), p99: pct(ttfts, 0.99), hit_p50: hitTtfts.length ? pct(hitTtfts, 0.5) : 0,
           spend: spend.total.cost - before.cost, hits, upstream: spend.total.requests - before.requests };
}

const up = await startFakeUpstream();
await up.script({ default: { ttft_ms: 300, tokens_per_s: 60, tokens: 64 } });
const runs = { off: [], on: [] };
for (let rep = 0; rep < REPS; ++rep) {
  const seq = sequence(rep + 1);
  for (const mode of rep % 2 ? ['on', 'off'] : ['off', 'on']) {
    const r = await runOne(mode === 'on', seq, up);
    runs[mode].push(r);
    console.log(`rep ${rep} cache ${mode}: TTFT p50 ${r.p50.toFixed(3)} p99 ${r.p99.toFixed(3)} s, spend ${r.spend.toFixed(6)}, hits ${r.hits}`);
  }
}
await up.close();
const ratio = (k) => meanCi(runs.on.map((r, i) => r[k] / runs.off[i][k]));
const info = JSON.parse(execFileSync(HONE, ['info', '--json', '--no-bandwidth']).toString());
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
const base = path.join(root, 'bench/results', `cache-vm-${stamp}`);
const f = (x, d = 3) => `${x.mean.toFixed(d)} ± ${x.ci95.toFixed(d)}`;
const col = (mode, k) => meanCi(runs[mode].map((r) => r[k]));
const md = [
  '# response cache: support chat with 30% exact repeats, cache off vs on',
  '',
  `- date: ${new Date().toISOString()}`,
  `- machine: ${info.cpu_model}, ${info.logical_cpus} CPUs`,
  `- ${N} streamed greedy requests per run from ${CLIENTS} clients, 30% repeating an earlier request; a route to a simulated cloud (TTFT 300 ms, 60 tok/s, 64 tokens; prices 0.15 / 0.60 per 1M); ${REPS} repetitions, the same sequence for both setups, mean ± 95% CI`,
  '- command: `node bench/cache.mjs`',
  '',
  '| cache | TTFT p50 s | TTFT p99 s | TTFT p50 of hits s | cloud requests | cloud spend | hits |',
  '|---|---|---|---|---|---|---|',
  ...['off', 'on'].map((m) => `| ${m} | ${f(col(m, 'p50'))} | ${f(col(m, 'p99'))} | ${m === 'on' ? f(col(m, 'hit_p50'), 4) : '-'} | ${f(col(m, 'upstream'), 1)} | ${f(col(m, 'spend'), 6)} | ${f(col(m, 'hits'), 1)} |`),
  '',
  `Ratios on/off: TTFT p50 ${f(ratio('p50'))}, TTFT p99 ${f(ratio('p99'))}, cloud spend ${f(ratio('spend'))}.`,
  '',
  'A repeat that arrives while its original is still streaming is a miss (there is no request coalescing), so hits stay a little under the 30% of repeats.',
];
fs.writeFileSync(base + '.md', md.join('\n') + '\n');
fs.writeFileSync(base + '.json', JSON.stringify({ machine: info.cpu_model, runs }, null, 2));
console.log(md.join('\n'));
