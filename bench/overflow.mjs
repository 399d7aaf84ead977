#!/usr/bin/env node
// Overflow: the support-chat workload (a ~300-token shared system prompt, a
// ~30-token user turn, 128 generated tokens, streamed) from 16 clients at once
// against `hone serve` with a local model on this machine and a simulated
// cloud (tests/node/fake_upstream.mjs: TTFT 300 ms, 60 tok/s per stream,
// timers only, so it costs no local CPU). Three setups, in the same run:
//   local      the local model only;
//   on-errors  local, then the cloud only when the local server refuses (a
//              full queue answers 429), as gateways spill;
//   hone       local_first with ttft_slo: the router sends a request to the
//              cloud before it queues locally when the scheduler predicts a
//              time to first token over the SLO.
// Reports TTFT p50/p99 against the SLO, how busy the local engine stayed, the
// share of requests and tokens the cloud served, and lost requests.
//
// --think-min/--think-max S: each client waits a seeded uniform time in that
// range before each request (the same sequence in every setup): a service
// whose clients read their answers, so the load has peaks and troughs rather
// than being one long peak. Default 0: back to back.
//
// Usage: node bench/overflow.mjs [--model M.gguf] [--clients 16] [--requests 4] [--slo 1.5]
//          [--think-min 0] [--think-max 0]
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startFakeUpstream } from '../tests/node/fake_upstream.mjs';

const root = path.resolve(import.meta.dirname, '..');
const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
const HONE = arg('hone', path.join(root, 'build/hone'));
const CLIENTS = Number(arg('clients', 16));
const PER_CLIENT = Number(arg('requests', 4));
const SLO = Number(arg('slo', 1.5));
const SLOTS = Number(arg('slots', 4));
const MAX_QUEUE = Number(arg('max-queue', 8));
const THINK_MIN = Number(arg('think-min', 0)), THINK_MAX = Number(arg('think-max', 0));
const THINK = (() => {
  let x = 7;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Array.from({ length: CLIENTS }, () => Array.from({ length: PER_CLIENT }, () => THINK_MIN + rand() * (THINK_MAX - THINK_MIN)));
})();
let MODEL = arg('model', '');
if (!MODEL) {
  const dir = path.join(root, 'models');
  MODEL = path.join(dir, 'qwen2.5-0.5b.Q4_K_M.gguf');
  if (!fs.existsSync(MODEL)) execFileSync('bash', [path.join(root, 'scripts/main-job.sh')], { stdio: 'inherit', env: { ...process.env, MODELS_DIR: dir } });
}
const SYSTEM = ('You are the support assistant of a web shop. Answer politely, in two or three sentences, ' +
  'cite the order number when the customer gives one, never promise refunds without a ticket, and ask for the ' +
  'order number when it is missing. ').repeat(6);
const TURNS = ['Where is my order 1234?', 'I want to return the blue shoes I bought last week.',
  'My package arrived damaged, what can I do?', 'Can I change the delivery address of order 9876?'];
const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN; };
// A port the kernel says is free now (a random one may be a client's
// ephemeral port: a run of this bench died on one, ECONNREFUSED).
const port = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
});

async function metricsText(url) { return (await fetch(url + '/metrics')).text(); }
function sum(text, name, filter = '') {
  let t = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + '{') && line.includes(filter)) t += Number(line.split(' ').pop());
  return t;
}

async function runSetup(name, toml, up) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-overflow-'));
  // Its own state dir (the spend ledger): the previous setup's server may
  // still hold the default one while it drains.
  fs.writeFileSync(path.join(tmp, 'hone.toml'), `state_dir = "${tmp}/state"\n` + toml);
  const p = await port();
  const proc = spawn(HONE, ['serve', '--config', path.join(tmp, 'hone.toml'), '-m', MODEL, '--port', String(p),
    '--slots', String(SLOTS), '--max-queue', String(MAX_QUEUE), '--ctx', '1024'], { stdio: ['ignore', 'ignore', 'pipe'] });
  // The request log lines (JSON on stderr) say which target served each request and its TTFT.
  let logText = '';
  proc.stderr.on('data', (d) => { logText += d; });
  const url = `http://127.0.0.1:${p}`;
  let exited = null;
  proc.on('exit', (code, sig) => { exited = `exit ${code ?? sig}`; });
  for (let i = 0; ; ++i) {
    if (exited || i >= 600) throw new Error(`hone serve (${name}) ${exited || 'not healthy after 60 s'}:\n${logText.slice(-4000)}`);
    try { if ((await fetch(url + '/health')).ok) break; } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  const model = path.basename(MODEL, '.gguf');
  // Warm-up: load the model and cache the system prompt.
  await fetch(url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'hi' }], max_tokens: 4 }) });
  await up.reset();
  await up.script({ default: { ttft_ms: 300, tokens_per_s: 60, tokens: 128 } });
  // Busy: a sample with a local request running. "With demand": of the
  // samples taken while some client had a request in flight (local or cloud),
  // leaving out the stretches when every client was thinking, where no engine
  // could be busy (the first think time is at least --think-min).
  let busySamples = 0, samples = 0, running = 0, demandSamples = 0, busyWithDemand = 0, inFlight = 0;
  const sampler = setInterval(async () => {
    try {
      const demand = inFlight > 0;
      const m = await metricsText(url);
      running = sum(m, 'hone_num_requests_running');
      ++samples; if (running > 0) ++busySamples;
      if (demand || inFlight > 0) { ++demandSamples; if (running > 0) ++busyWithDemand; }
    } catch {}
  }, 250);
  const before = await metricsText(url);
  const ttfts = [], lost = [];
  let cloudReq = 0, totalTok = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    for (let k = 0; k < PER_CLIENT; ++k) {
      if (THINK[c][k] > 0) await new Promise((r) => setTimeout(r, THINK[c][k] * 1000));
      const s = performance.now();
      ++inFlight;
      try {
        const res = await fetch(url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: 'support', stream: true, max_tokens: 128, temperature: 0.7,
            messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: TURNS[(c + k) % TURNS.length] }] }) });
        if (res.status !== 200) { lost.push(`HTTP ${res.status}`); await res.text(); continue; }
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        let first = null, buf = '', ok = false, tokens = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, i); buf = buf.slice(i + 2);
            if (ev === 'data: [DONE]') { ok = true; continue; }
            if (!ev.startsWith('data: ')) continue;
            const j = JSON.parse(ev.slice(6));
            if (j.error) { lost.push('stream error'); continue; }
            const d = j.choices?.[0]?.delta?.content;
            if (d) { if (first === null) first = performance.now(); ++tokens; }
          }
        }
        if (!ok) lost.push('no [DONE]');
        totalTok += tokens;
        if (first !== null) ttfts.push((first - s) / 1000);
      } catch (e) { lost.push(String(e)); } finally { --inFlight; }
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const after = await metricsText(url);
  const localTok = sum(after, 'hone_generation_tokens_total', model) - sum(before, 'hone_generation_tokens_total', model);
  cloudReq = (await up.log()).filter((e) => e.path.endsWith('/chat/completions')).length;
  const log = await up.log();
  const cloudTok = log.reduce((a, e) => a + (e.status === 200 ? Math.min(128, e.max_tokens ?? 128) : 0), 0);
  const predErr = [];
  for (const line of after.split('\n')) if (line.startsWith('hone_route_ttft_prediction_error_seconds_sum')) predErr.push(line);
  await new Promise((r) => { if (exited) r(); else { proc.on('exit', r); proc.kill('SIGTERM'); } });
  const byTarget = {};
  for (const line of logText.split('\n')) {
    if (!line.startsWith('{')) continue;
    let j;
    try { j = JSON.parse(line); } catch { continue; }
    if (!j.route || j.path !== '/v1/chat/completions' || j.ttft_ms === undefined) continue;
    const m = / target=(\S+)/.exec(j.route);
    const t = m ? (m[1].startsWith('local:') ? 'local' : 'cloud') : 'unknown';
    (byTarget[t] ||= []).push(j.ttft_ms / 1000);
  }
  const ttft_by_target = Object.fromEntries(Object.entries(byTarget).map(([k, v]) => [k, { n: v.length, p50_s: pct(v, 0.5), p99_s: pct(v, 0.99) }]));
  const total = CLIENTS * PER_CLIENT;
  return { setup: name, requests: total, seconds, ttft_p50_s: pct(ttfts, 0.5), ttft_p99_s: pct(ttfts, 0.99),
           ttft_p99_vs_slo: pct(ttfts, 0.99) / SLO, local_busy: samples ? busySamples / samples : 0,
           local_busy_with_demand: demandSamples ? busyWithDemand / demandSamples : 0,
           cloud_request_share: cloudReq / total, cloud_token_share: cloudTok / Math.max(1, cloudTok + localTok),
           local_tokens: localTok, cloud_tokens_est: cloudTok, lost: lost.length, lost_reasons: [...new Set(lost)],
           prediction_error: predErr, server_ttft_by_target: ttft_by_target };
}

const up = await startFakeUpstream();
const cloud = `[[upstream]]\nname = "cloud"\nbase_url = "${up.url}/v1"\napi_keys = ["sk-bench"]\nmax_concurrent = 256\n`;
const model = path.basename(MODEL, '.gguf');
const setups = [
  ['local', `[[route]]\nname = "support"\ntargets = ["local:${model}"]\npolicy = "failover"\n`],
  ['on-errors', cloud + `[[route]]\nname = "support"\ntargets = ["local:${model}", "cloud:m"]\npolicy = "failover"\n`],
  ['hone', cloud + `[[route]]\nname = "support"\ntargets = ["local:${model}", "cloud:m"]\npolicy = "local_first"\nttft_slo = "${SLO}s"\n`],
];
const results = [];
for (const [name, toml] of setups) {
  process.stderr.write(`== ${name}\n`);
  const r = await runSetup(name, toml, up);
  process.stderr.write(JSON.stringify(r) + '\n');
  results.push(r);
}
await up.close();
const host = os.hostname().split('.')[0];
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
const out = { benchmark: 'overflow: local only vs spill on errors vs hone local_first', date: new Date().toISOString(),
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length }, model: path.relative(root, MODEL), clients: CLIENTS,
  requests_per_client: PER_CLIENT, think_s: [THINK_MIN, THINK_MAX], slo_s: SLO, slots: SLOTS, max_queue: MAX_QUEUE, cloud: 'TTFT 300 ms, 60 tok/s (timers)', results };
const base = path.join(root, 'bench/results', `overflow-${host}-${stamp}`);
fs.writeFileSync(base + '.json', JSON.stringify(out, null, 2));
const md = [`# ${out.benchmark}`, '', `- date: ${out.date}`, `- machine: ${out.machine.cpu}, ${out.machine.cores} CPUs`,
  `- local model \`${out.model}\`, ${SLOTS} slots, max queue ${MAX_QUEUE}; simulated cloud: ${out.cloud}`,
  `- ${CLIENTS} streaming clients x ${PER_CLIENT} requests: ~300-token shared system prompt, ~30-token user turn, 128 tokens; TTFT SLO ${SLO} s; ` +
    (THINK_MAX > 0 ? `think time before each request ${THINK_MIN}-${THINK_MAX} s (seeded, the same in every setup)` : 'back to back (no think time)'),
  `- command: \`node bench/overflow.mjs --clients ${CLIENTS} --requests ${PER_CLIENT} --slo ${SLO}` +
    (THINK_MAX > 0 ? ` --think-min ${THINK_MIN} --think-max ${THINK_MAX}` : '') + '\`', '',
  '| setup | TTFT p50 s | TTFT p99 s | p99 / SLO | local busy (whole run / with demand) | cloud requests | cloud tokens | lost | wall s | server-side TTFT p50/p99 s by target |', '|---|---|---|---|---|---|---|---|---|---|'];
for (const r of results)
  md.push(`| ${r.setup} | ${r.ttft_p50_s.toFixed(2)} | ${r.ttft_p99_s.toFixed(2)} | ${r.ttft_p99_vs_slo.toFixed(2)} | ${(100 * r.local_busy).toFixed(0)}% / ${(100 * r.local_busy_with_demand).toFixed(0)}% | ` +
          `${(100 * r.cloud_request_share).toFixed(0)}% | ${(100 * r.cloud_token_share).toFixed(0)}% | ${r.lost} | ${r.seconds.toFixed(0)} | ` +
          Object.entries(r.server_ttft_by_target).map(([k, v]) => `${k} (${v.n}): ${v.p50_s.toFixed(2)}/${v.p99_s.toFixed(2)}`).join(', ') + ' |');
fs.writeFileSync(base + '.md', md.join('\n') + '\n');
console.log(md.join('\n'));
