#!/usr/bin/env node
// hone's router over three hone replicas: prefix affinity against round robin.
//
// Three `hone serve` replicas on loopback (--threads 1 each by default: this
// is sized for a 2-core machine) behind a fourth `hone serve` whose route
// "support" targets them all (kind = "hone"). The workload is support chat:
// 8 tenants, each with its own ~0.8 KB system prompt (~210 tokens), and 16 clients (two per
// tenant), each sending its tenant's system prompt and a new question,
// streamed, greedy, then reading the answer for a while (think time 6-14 s,
// the same seeded sequence for both policies) before the next. Each repetition runs both
// policies on fresh replicas (cold caches), alternating which goes first.
//
// Reported per policy: the replicas' prefix-cache hit rate (prompt tokens
// found in a slot's KV over prompt tokens looked up, from their
// hone_prefix_cache_* counters), TTFT p50/p99 at the client and aggregate
// output tok/s; and the ratios affinity / round robin, mean ± 95% CI. With
// 80 requests a run, one run's p99 is its slowest request or two, so the
// TTFT tail is also reported pooled over the repetitions (p95 and p99 of all
// their requests), with a bootstrap 95% interval of the ratio (requests
// resampled within each run). The JSON keeps every request (client, start,
// TTFT, the replica the router chose) and the replicas' request log lines.
//
// Usage: node bench/replicas.mjs [--model models/qwen2.5-0.5b.Q4_K_M.gguf]
//          [--requests 4] (per client) [--reps 3] [--threads 1] [--slots 4] [--think-min 6] [--think-max 14] [--cold 1]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
const HONE = arg('hone', path.join(root, 'build/hone'));
const MODEL = path.resolve(arg('model', path.join(root, 'models/qwen2.5-0.5b.Q4_K_M.gguf')));
const PER_CLIENT = Number(arg('requests', 4)), REPS = Number(arg('reps', 3));
const THREADS = arg('threads', '1'), SLOTS = arg('slots', '4');
const REPLICAS = 3, TENANTS = 8, CLIENTS = 16, MAX_TOKENS = 16;
const THINK_MIN_S = Number(arg('think-min', 6)), THINK_MAX_S = Number(arg('think-max', 14));
// --cold 1: the clients start on replicas that have never seen a tenant, so
// the first wave of cold system prompts (the same for both policies) is in
// the numbers. Default: each tenant's prompt has been asked once through the
// router before the clock starts (where the policy put it), as in a service
// that has been up for a while; the tail then shows the policy, not the start.
const COLD = arg('cold', '0') === '1';
// Think times: the same for both policies of a repetition.
function thinkTimes(seed) {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Array.from({ length: CLIENTS }, () => Array.from({ length: PER_CLIENT }, () => THINK_MIN_S + rand() * (THINK_MAX_S - THINK_MIN_S)));
}
if (!fs.existsSync(MODEL)) {
  console.error(`no model at ${MODEL}: run ./setup.sh (it makes models/qwen2.5-0.5b.Q4_K_M.gguf) or pass --model`);
  process.exit(1);
}

const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const meanCi = (xs) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1));
  const t = [0, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36][xs.length - 1] ?? 1.96;
  return { mean: m, ci95: xs.length > 1 ? (t * sd) / Math.sqrt(xs.length) : NaN };
};
const SHOPS = ['garden tools', 'bicycles', 'tea', 'phone cases', 'lamps', 'shoes', 'board games', 'coffee beans'];
const system = (t) => `You are the support assistant of a web shop that sells ${SHOPS[t]} (tenant ${t}). ` +
  `Answer in two sentences, politely, and never promise refunds the policy does not allow. Policy for ${SHOPS[t]}: `.repeat(1) +
  `returns within 30 days with the receipt; shipping takes 3 to 5 working days; orders over 50 euros ship free; `.repeat(6);

// Every server this run started: a run that fails must not leave them behind.
const children = new Set();
process.on('exit', () => { for (const p of children) p.kill('SIGKILL'); });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));

function start(args, env = {}) {
  const proc = spawn(HONE, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  let log = '';
  const ready = new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) resolve({ url: m[1], probe: (/probes \([^)]*\) on (http:\/\/\S+)/.exec(log) || [])[1] });
    });
    proc.on('exit', (c) => reject(new Error('hone serve exited ' + c + '\n' + log)));
  });
  return ready.then((u) => ({ ...u, log: () => log, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGTERM'); }) }));
}

async function ask(url, model, tenant, q) {
  const t0 = performance.now();
  const res = await fetch(url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, stream: true, temperature: 0, max_tokens: MAX_TOKENS, stream_options: { include_usage: true },
      messages: [{ role: 'system', content: system(tenant) }, { role: 'user', content: q }] }) });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let ttft = null, text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const chunk = dec.decode(value);
    text += chunk;
    if (ttft === null && /"content":"[^"]/.test(chunk)) ttft = (performance.now() - t0) / 1000;
  }
  const usage = /"completion_tokens":(\d+)/.exec(text);
  return { ttft: ttft ?? (performance.now() - t0) / 1000, tokens: usage ? Number(usage[1]) : 0 };
}

async function prefixCounters(replicas) {
  let q = 0, h = 0;
  for (const r of replicas) {
    const text = await (await fetch(r.probe + '/metrics')).text();
    q += Number((/^hone_prefix_cache_queries_total\{model_name="qwen"\} (\S+)$/m.exec(text) || [0, 0])[1]);
    h += Number((/^hone_prefix_cache_hits_total\{model_name="qwen"\} (\S+)$/m.exec(text) || [0, 0])[1]);
  }
  return { q, h };
}

async function runOne(policy, rep, think) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-replicas-'));
  fs.mkdirSync(path.join(tmp, 'models'));
  fs.symlinkSync(MODEL, path.join(tmp, 'models', 'qwen.gguf'));
  const common = ['--models', path.join(tmp, 'models'), '--threads', THREADS, '--slots', SLOTS, '--ctx', '2048',
                  '--probe-port', '0', '--max-queue', '64', '--profiles', 'false'];
  const replicas = [];
  for (let i = 0; i < REPLICAS; ++i) replicas.push(await start(common, { XDG_STATE_HOME: path.join(tmp, `state${i}`) }));
  const toml = [`state_dir = "${tmp}/router-state"`, ...replicas.flatMap((r, i) => [
    '[[upstream]]', `name = "r${i + 1}"`, `base_url = "${r.url}/v1"`, 'kind = "hone"', `metrics_url = "${r.probe}/metrics"`,
    'load_interval = "500ms"', 'health_interval = "5s"', 'max_concurrent = 64', 'first_byte_timeout = "300s"', '']),
    '[[route]]', 'name = "support"', `targets = [${replicas.map((_, i) => `"r${i + 1}:qwen"`).join(', ')}]`,
    `policy = "${policy}"`, 'retry = { deadline = "300s" }'].join('\n');
  fs.writeFileSync(path.join(tmp, 'router.toml'), toml);
  const router = await start(['--config', path.join(tmp, 'router.toml'), '--models', path.join(tmp, 'models')]);
  process.on('exit', () => { if (process.exitCode) console.error('router log:\n' + router.log().slice(-6000)); });
  // Warm-up, not counted: each replica loads the model and measures its
  // prefill rate on a prompt no tenant shares.
  await Promise.all(replicas.map((r) => ask(r.url, 'qwen', 0, 'warm-up').catch((e) => { throw e; })));
  await new Promise((r) => setTimeout(r, 1200));  // the router's first scrapes
  if (!COLD) {
    for (let t = 0; t < TENANTS; ++t) await ask(router.url, 'support', t, `Warm-up for tenant ${t}: hello`);
    await new Promise((r) => setTimeout(r, 1200));  // scrapes after the warm-up's load
  }
  const before = await prefixCounters(replicas);
  const ttfts = [], samples = [];
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    for (let i = 0; i < PER_CLIENT; ++i) {
      await new Promise((r) => setTimeout(r, think[c][i] * 1000));
      const start = (performance.now() - t0) / 1000;
      const r = await ask(router.url, 'support', c % TENANTS, `Customer ${c}, question ${i} (run ${rep}): where is my order number ${1000 + c * 10 + i}?`);
      ttfts.push(r.ttft);
      samples.push({ client: c, tenant: c % TENANTS, i, start_s: start, ttft_s: r.ttft });
      tokens += r.tokens;
    }
  }));
  const wall = (performance.now() - t0) / 1000;
  const after = await prefixCounters(replicas);
  await router.stop();
  for (const r of replicas) await r.stop();
  // Which replica each request went to, from the router's log lines (route
  // and ttft_ms), and what each replica logged (its queue wait, its prompt).
  const logLines = (text) => text.split('\n').filter((l) => l.startsWith('{"')).map((l) => { try { return JSON.parse(l); } catch { return null; } })
    .filter((j) => j && j.path === '/v1/chat/completions');
  const routed = logLines(router.log()).slice(-samples.length).map((j) => ({ target: (/target=(\S+)/.exec(j.route || '') || [])[1], ttft_ms: j.ttft_ms, ms: j.ms }));
  const replicaLogs = replicas.map((r) => logLines(r.log()).map((j) => ({ ttft_ms: j.ttft_ms, queue_ms: j.queue_ms, prompt_tokens: j.prompt_tokens, ms: j.ms })));
  fs.rmSync(tmp, { recursive: true, force: true });
  return { hit_rate: (after.h - before.h) / Math.max(1, after.q - before.q), ttft_p50: pct(ttfts, 0.5),
           ttft_p99: pct(ttfts, 0.99), tok_s: tokens / wall, wall_s: wall, requests: ttfts.length,
           samples, routed, replica_logs: replicaLogs };
}

const runs = { affinity: [], round_robin: [] };
for (let rep = 0; rep < REPS; ++rep) {
  for (const policy of rep % 2 ? ['affinity', 'round_robin'] : ['round_robin', 'affinity']) {
    const r = await runOne(policy, rep, thinkTimes(rep + 1));
    runs[policy].push(r);
    const targets = {};
    for (const x of r.routed) targets[x.target] = (targets[x.target] || 0) + 1;
    console.log(`rep ${rep} ${policy}: targets ${JSON.stringify(targets)}; slowest TTFTs ${[...r.samples].sort((a, b) => b.ttft_s - a.ttft_s).slice(0, 3).map((x) => `${x.ttft_s.toFixed(1)} s (tenant ${x.tenant}, at ${x.start_s.toFixed(0)} s)`).join(', ')}`);
    console.log(`rep ${rep} ${policy}: hit rate ${(100 * r.hit_rate).toFixed(1)}%, TTFT p50 ${r.ttft_p50.toFixed(2)} p99 ${r.ttft_p99.toFixed(2)} s, ${r.tok_s.toFixed(1)} tok/s (${r.requests} requests in ${r.wall_s.toFixed(1)} s)`);
  }
}
const ratio = (k) => meanCi(runs.affinity.map((r, i) => r[k] / runs.round_robin[i][k]));
const col = (p, k) => meanCi(runs[p].map((r) => r[k]));
const f = (x, d = 3) => `${x.mean.toFixed(d)} ± ${x.ci95.toFixed(d)}`;
// The tail pooled over repetitions, with a bootstrap interval of the ratio:
// each resample draws every run's requests with replacement (the runs are
// the strata), pools them per policy and takes the quantile.
const pooled = (p, q) => pct(runs[p].flatMap((r) => r.samples.map((x) => x.ttft_s)), q);
function bootstrapRatio(q, n = 2000) {
  let x = 12345;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  const draw = (p) => runs[p].flatMap((r) => r.samples.map(() => r.samples[Math.floor(rand() * r.samples.length)].ttft_s));
  const ratios = Array.from({ length: n }, () => pct(draw('affinity'), q) / pct(draw('round_robin'), q)).sort((a, b) => a - b);
  return { ratio: pooled('affinity', q) / pooled('round_robin', q), lo: ratios[Math.floor(0.025 * n)], hi: ratios[Math.floor(0.975 * n)] };
}
const tail = [0.95, 0.99].map((q) => ({ q, rr: pooled('round_robin', q), af: pooled('affinity', q), ...bootstrapRatio(q) }));
const info = JSON.parse(execFileSync(HONE, ['info', '--json', '--no-bandwidth']).toString());
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
const base = path.join(root, 'bench/results', `replicas-vm-${stamp}`);
const md = [
  '# hone router over 3 hone replicas: prefix affinity vs round robin',
  '',
  `- date: ${new Date().toISOString()}`,
  `- machine: ${info.cpu_model}, ${info.logical_cpus} CPUs; replicas with --threads ${THREADS} --slots ${SLOTS} --ctx 2048 each, the router a fourth hone serve, all on this machine`,
  `- model: ${path.basename(MODEL)} (served as "qwen")`,
  `- workload: ${TENANTS} tenants with their own ~0.8 KB system prompt (~210 tokens), ${CLIENTS} clients (two per tenant), ${PER_CLIENT} streamed greedy requests each (${MAX_TOKENS} tokens), each after a think time of ${THINK_MIN_S}-${THINK_MAX_S} s (seeded, the same for both policies); fresh replicas for every run, ${COLD ? 'cold (no tenant seen before the clock starts)' : 'each tenant asked once through the router before the clock starts (not counted)'}; ${REPS} repetitions alternating which policy goes first; mean ± 95% CI`,
  '- command: `node bench/replicas.mjs`' + (process.argv.length > 2 ? ` (${process.argv.slice(2).join(' ')})` : ''),
  '',
  '| policy | prefix-cache hit rate | TTFT p50 s | TTFT p99 s | output tok/s |',
  '|---|---|---|---|---|',
  ...['round_robin', 'affinity'].map((p) => `| ${p} | ${f(col(p, 'hit_rate'))} | ${f(col(p, 'ttft_p50'))} | ${f(col(p, 'ttft_p99'))} | ${f(col(p, 'tok_s'), 1)} |`),
  '',
  `Ratios affinity / round robin: hit rate ${f(ratio('hit_rate'))}, TTFT p50 ${f(ratio('ttft_p50'))}, TTFT p99 ${f(ratio('ttft_p99'))}, tok/s ${f(ratio('tok_s'))}.`,
  '',
  `TTFT tail pooled over the ${REPS} repetitions (${runs.affinity.reduce((a, r) => a + r.samples.length, 0)} requests per policy), bootstrap 95% interval of the ratio:`,
  '',
  '| quantile | round_robin s | affinity s | affinity / round robin | 95% interval |',
  '|---|---|---|---|---|',
  ...tail.map((t) => `| p${Math.round(100 * t.q)} | ${t.rr.toFixed(3)} | ${t.af.toFixed(3)} | ${t.ratio.toFixed(3)} | ${t.lo.toFixed(3)} - ${t.hi.toFixed(3)} |`),
];
fs.writeFileSync(base + '.md', md.join('\n') + '\n');
fs.writeFileSync(base + '.json', JSON.stringify({ machine: info.cpu_model, threads: THREADS, slots: SLOTS, runs }, null, 2));
console.log(md.join('\n'));
