#!/usr/bin/env node
// Canary: a simulated rollout through a hone route with a gray release, in
// one run. The baseline is a simulated cloud (tests/node/fake_upstream.mjs,
// timers only) with TTFT 50 ms; the candidate is 40% slower (TTFT 70 ms, so
// 40% slower at P99 too) in one scenario and as fast as the baseline in the
// other. 8 clients send new conversations back to back. Steps 5/25/50/100%,
// hold 5 s, min_requests 30, max_p99_ratio 1.25. Reports, over 3
// repetitions, the time until the slow candidate was rolled back and how
// many requests it served by then, and the time the healthy one took to
// reach 100%.
//
// Usage: node bench/canary.mjs [--reps 3] [--hold 5]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeUpstream } from '../tests/node/fake_upstream.mjs';

const root = path.resolve(import.meta.dirname, '..');
const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
const HONE = arg('hone', path.join(root, 'build/hone'));
const REPS = Number(arg('reps', 3)), HOLD = Number(arg('hold', 5)), CLIENTS = 8;
const meanCi = (xs) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1));
  const t = [0, 12.71, 4.30, 3.18, 2.78, 2.57][xs.length - 1] ?? 1.96;
  return { mean: m, ci95: (t * sd) / Math.sqrt(xs.length) };
};

async function serve(base, cand) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-canarybench-'));
  const toml = [`state_dir = "${tmp}/state"`,
    '[[upstream]]', 'name = "base"', `base_url = "${base.url}/v1"`, 'health_interval = "1h"',
    '[[upstream]]', 'name = "cand"', `base_url = "${cand.url}/v1"`, 'health_interval = "1h"',
    '[[route]]', 'name = "support"', 'targets = ["base:m"]', 'policy = "failover"',
    `canary = { target = "cand:m", steps = [5, 25, 50, 100], hold = "${HOLD}s", min_requests = 30, max_p99_ratio = 1.25, max_error_rate = 0.02 }`].join('\n');
  fs.writeFileSync(path.join(tmp, 'hone.toml'), toml);
  const proc = spawn(HONE, ['serve', '--config', path.join(tmp, 'hone.toml'), '--port', '0', '--quiet', 'true', '--models', tmp],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => { log += d; const m = /listening on (http:\/\/\S+)/.exec(log); if (m) resolve(m[1]); });
    proc.on('exit', (c) => reject(new Error('hone serve exited ' + c + '\n' + log)));
  });
  return { url, log: () => log, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGTERM'); }), tmp };
}

async function scenario(candidateTtftMs, until) {
  const base = await startFakeUpstream(), cand = await startFakeUpstream();
  await base.script({ default: { ttft_ms: 50, tokens: 4, tokens_per_s: 1000 } });
  await cand.script({ default: { ttft_ms: candidateTtftMs, tokens: 4, tokens_per_s: 1000 } });
  const s = await serve(base, cand);
  const t0 = performance.now();
  let n = 0, state = 'ramping', stop = false;
  const status = async () => (await (await fetch(s.url + '/hone/routes')).json()).routes[0].canary;
  const watcher = (async () => {
    while (!stop) {
      const c = await status();
      state = c.state;
      if (state === until || state === 'rolled_back' || state === 'promoted' || performance.now() - t0 > 180000) stop = true;
      else await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (!stop) {
      const i = n++;
      await fetch(s.url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'support', user: `customer-${i}`, max_tokens: 4, messages: [{ role: 'user', content: `Question ${i}` }] }) })
        .then((r) => r.text());
    }
  }));
  await watcher;
  const seconds = (performance.now() - t0) / 1000;
  const served = (await cand.log()).filter((e) => e.path.endsWith('/chat/completions')).length;
  const c = await status();
  await s.stop();
  await base.close();
  await cand.close();
  fs.rmSync(s.tmp, { recursive: true, force: true });
  return { state, seconds, candidate_requests: served, total_requests: n, reason: c.reason };
}

const slow = [], healthy = [];
for (let rep = 0; rep < REPS; ++rep) {
  const a = await scenario(70, 'rolled_back');
  slow.push(a);
  console.log(`rep ${rep} slow candidate: ${a.state} after ${a.seconds.toFixed(1)} s, ${a.candidate_requests} of ${a.total_requests} requests (${a.reason})`);
  const b = await scenario(50, 'promoted');
  healthy.push(b);
  console.log(`rep ${rep} healthy candidate: ${b.state} after ${b.seconds.toFixed(1)} s, ${b.candidate_requests} of ${b.total_requests} requests`);
}
const info = JSON.parse(execFileSync(HONE, ['info', '--json', '--no-bandwidth']).toString());
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
const outBase = path.join(root, 'bench/results', `canary-vm-${stamp}`);
const f = (xs, k, d = 1) => { const x = meanCi(xs.map((r) => r[k])); return `${x.mean.toFixed(d)} ± ${x.ci95.toFixed(d)}`; };
const md = [
  '# canary: a rollout that judges itself',
  '',
  `- date: ${new Date().toISOString()}`,
  `- machine: ${info.cpu_model}, ${info.logical_cpus} CPUs`,
  `- baseline: simulated cloud, TTFT 50 ms; candidate: TTFT 70 ms (40% slower) or 50 ms (healthy); ${CLIENTS} clients, a new conversation per request; steps 5/25/50/100%, hold ${HOLD} s, min_requests 30, max_p99_ratio 1.25; ${REPS} repetitions, mean ± 95% CI`,
  '- command: `node bench/canary.mjs`',
  '',
  '| candidate | outcome | seconds | candidate requests | all requests |',
  '|---|---|---|---|---|',
  `| 40% slower | ${slow.map((r) => r.state).join(', ')} | ${f(slow, 'seconds')} | ${f(slow, 'candidate_requests')} | ${f(slow, 'total_requests', 0)} |`,
  `| healthy | ${healthy.map((r) => r.state).join(', ')} | ${f(healthy, 'seconds')} | ${f(healthy, 'candidate_requests')} | ${f(healthy, 'total_requests', 0)} |`,
  '',
  `Rollback reasons: ${slow.map((r) => r.reason).join('; ')}.`,
];
fs.writeFileSync(outBase + '.md', md.join('\n') + '\n');
fs.writeFileSync(outBase + '.json', JSON.stringify({ machine: info.cpu_model, slow, healthy }, null, 2));
console.log(md.join('\n'));
