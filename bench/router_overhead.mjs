#!/usr/bin/env node
// Router overhead: non-streamed chat requests to a fast loopback upstream
// (tests/node/fake_upstream.mjs, timers only), sent directly, through
// `hone serve` (a [[route]] to that upstream) and through Portkey's AI gateway
// (npm @portkey-ai/gateway, bench/node), interleaved in rounds, serially and at
// 8 and 64 concurrent clients, on the same machine in the same run.
//
// Usage: node bench/router_overhead.mjs [--requests 400] [--rounds 3] [--concurrency 1,8,64]
// Writes bench/results/router_overhead-<host>-<date>.{md,json}.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeUpstream } from '../tests/node/fake_upstream.mjs';

const root = path.resolve(import.meta.dirname, '..');
const arg = (name, def) => {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : def;
};
const REQUESTS = Number(arg('requests', 400));
const ROUNDS = Number(arg('rounds', 3));
const LEVELS = arg('concurrency', '1,8,64').split(',').map(Number);
const HONE = arg('hone', path.join(root, 'build/hone'));

function freePort() {
  return 20000 + Math.floor(Math.random() * 20000);
}

async function waitFor(url, ms = 20000) {
  const t0 = Date.now();
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {}
    if (Date.now() - t0 > ms) throw new Error('not up: ' + url);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function load(target, n, conc) {
  const body = JSON.stringify({ model: target.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  const lat = [];
  let next = 0, failed = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < n) {
      ++next;
      const s = performance.now();
      try {
        const r = await fetch(target.url, { method: 'POST', headers: target.headers, body });
        await r.text();
        if (r.status !== 200) ++failed;
      } catch {
        ++failed;
      }
      lat.push(performance.now() - s);
    }
  }));
  return { lat, seconds: (performance.now() - t0) / 1000, failed };
}

const up = await startFakeUpstream();
await up.script({ default: { ttft_ms: 0, tokens: 4, tokens_per_s: 1e6 } });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-overhead-'));
const honePort = freePort(), pkPort = freePort();
fs.writeFileSync(path.join(tmp, 'hone.toml'), `
[[upstream]]
name = "fake"
base_url = "${up.url}/v1"
api_keys = ["sk-bench"]
max_concurrent = 1024
[[route]]
name = "cloud"
targets = ["fake:m"]
policy = "failover"
`);
const hone = spawn(HONE, ['serve', '--config', path.join(tmp, 'hone.toml'), '-m',
  path.resolve(root, '../shared/models/stories260K.gguf'), '--port', String(honePort), '--quiet', 'true', '--threads', '1'],
  { stdio: 'ignore' });
const pkMain = path.join(root, 'bench/node/node_modules/@portkey-ai/gateway/build/start-server.js');
if (!fs.existsSync(pkMain)) execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: path.join(root, 'bench/node') });
const portkey = spawn('node', [pkMain, `--port=${pkPort}`, '--headless'], { stdio: 'ignore' });
try {
  await waitFor(`http://127.0.0.1:${honePort}/health`);
  await waitFor(`http://127.0.0.1:${pkPort}/`);
  const json = { 'Content-Type': 'application/json' };
  const targets = {
    direct: { url: `${up.url}/v1/chat/completions`, model: 'm', headers: { ...json, Authorization: 'Bearer sk-bench' } },
    hone: { url: `http://127.0.0.1:${honePort}/v1/chat/completions`, model: 'cloud', headers: json },
    portkey: { url: `http://127.0.0.1:${pkPort}/v1/chat/completions`, model: 'm',
               headers: { ...json, Authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai',
                          'x-portkey-custom-host': `${up.url}/v1` } },
  };
  for (const t of Object.values(targets)) await load(t, 50, 4);  // warm-up
  const results = {};
  for (const c of LEVELS) {
    results[c] = { direct: [], hone: [], portkey: [] };
    const tput = { direct: [], hone: [], portkey: [] };
    const failed = { direct: 0, hone: 0, portkey: 0 };
    for (let round = 0; round < ROUNDS; ++round) {
      const names = Object.keys(targets);
      if (round % 2) names.reverse();
      for (const name of names) {
        const r = await load(targets[name], REQUESTS, c);
        results[c][name].push(...r.lat);
        tput[name].push(REQUESTS / r.seconds);
        failed[name] += r.failed;
        process.stderr.write(`c=${c} round ${round + 1} ${name}: p50 ${pct(r.lat, 0.5).toFixed(2)} ms, ${(REQUESTS / r.seconds).toFixed(0)} req/s\n`);
      }
    }
    results[c] = Object.fromEntries(Object.entries(results[c]).map(([k, lat]) => [k, {
      p50_ms: pct(lat, 0.5), p99_ms: pct(lat, 0.99), req_per_s: tput[k].reduce((a, b) => a + b, 0) / tput[k].length,
      req_per_s_rounds: tput[k], failed: failed[k], n: lat.length }]));
  }
  const host = os.hostname().split('.')[0];
  const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const out = { benchmark: 'router overhead: direct vs hone serve vs Portkey gateway 1.15.2', date: new Date().toISOString(),
                machine: { cpu, cores: os.cpus().length }, requests_per_round: REQUESTS, rounds: ROUNDS, results };
  const base = path.join(root, 'bench/results', `router_overhead-${host}-${stamp}`);
  fs.writeFileSync(base + '.json', JSON.stringify(out, null, 2));
  const md = [`# ${out.benchmark}`, '', `- date: ${out.date}`, `- machine: ${cpu}, ${os.cpus().length} CPUs (the upstream, the routers and the client share them)`,
    `- ${ROUNDS} interleaved rounds of ${REQUESTS} non-streamed chat requests per path and concurrency; upstream: tests/node/fake_upstream.mjs (timers only)`,
    `- command: \`node bench/router_overhead.mjs --requests ${REQUESTS} --rounds ${ROUNDS} --concurrency ${LEVELS.join(',')}\``, '',
    '| clients | path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s | vs direct | failed |', '|---|---|---|---|---|---|---|---|---|'];
  for (const c of LEVELS) {
    const d = results[c].direct;
    for (const name of ['direct', 'hone', 'portkey']) {
      const r = results[c][name];
      md.push(`| ${c} | ${name === 'hone' ? 'hone serve' : name === 'portkey' ? 'Portkey gateway' : 'direct'} | ${r.p50_ms.toFixed(2)} | ${r.p99_ms.toFixed(2)} | ` +
              `${name === 'direct' ? '-' : (r.p50_ms - d.p50_ms).toFixed(2)} | ${name === 'direct' ? '-' : (r.p99_ms - d.p99_ms).toFixed(2)} | ` +
              `${r.req_per_s.toFixed(0)} | ${(r.req_per_s / d.req_per_s).toFixed(2)}x | ${r.failed} |`);
    }
  }
  fs.writeFileSync(base + '.md', md.join('\n') + '\n');
  console.log(md.join('\n'));
} finally {
  hone.kill('SIGTERM');
  portkey.kill('SIGTERM');
  await up.close();
}
