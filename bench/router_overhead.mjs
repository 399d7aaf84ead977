#!/usr/bin/env node
// Router overhead: non-streamed chat requests to a fast loopback upstream
// (tests/node/fake_upstream.mjs, timers only), sent directly, through
// `hone serve` (a [[route]] to that upstream) and through Portkey's AI gateway
// (npm @portkey-ai/gateway, bench/node), interleaved in rounds, serially and at
// 8 and 64 concurrent clients, on the same machine in the same run.
//
// Usage: node bench/router_overhead.mjs [--requests 400] [--rounds 3] [--concurrency 1,8,64] [--wrk-seconds 5]
// Writes bench/results/router_overhead-<host>-<date>.{md,json}.
import { spawn, execFile, execFileSync } from 'node:child_process';
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
const WRK_SECONDS = Number(arg('wrk-seconds', 5));  // 0: no wrk rounds
// A second hone binary (an older build) measured in the same interleaved rounds;
// each server keeps its spend ledger in its own folder (one owner per ledger).
const HONE_B = arg('hone-b', '');
const NAMES = ['direct', 'hone', ...(HONE_B ? ['hone_b'] : []), 'portkey'];
const LABEL = { direct: 'direct', hone: 'hone serve', hone_b: `hone serve (${HONE_B})`, portkey: 'Portkey gateway' };

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

// The serial figures again with wrk (Debian's package), a C client: Node's
// fetch spends ~0.5 ms of CPU per request on the same 2 cores, which the
// routers then wait for. wrk's numbers are the routers' own.
function haveWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    return e.status !== undefined && e.code !== 'ENOENT';  // wrk --version exits 1
  }
}
// Asynchronous: the fake upstream answers from this process's event loop.
async function wrkSerial(target, seconds, dir) {
  const body = JSON.stringify({ model: target.model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  const lua = path.join(dir, `wrk-${target.model}-${Object.keys(target.headers).length}.lua`);
  fs.writeFileSync(lua, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\n` +
    Object.entries(target.headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`).join('\n') +
    '\ndone = function(summary, latency, requests)\n  io.write(string.format("JSON {\\"p50_us\\": %d, \\"p99_us\\": %d, \\"requests\\": %d, \\"errors\\": %d}\\n", ' +
    'latency:percentile(50), latency:percentile(99), summary.requests, summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))\nend\n');
  const out = await new Promise((resolve, reject) =>
    execFile('wrk', ['-t1', '-c1', `-d${seconds}s`, '-s', lua, target.url], (err, stdout) => (err ? reject(err) : resolve(stdout))));
  const m = /^JSON (.*)$/m.exec(out);
  if (!m) throw new Error(`wrk printed no result for ${target.url}:\n${out}`);
  const r = JSON.parse(m[1]);
  // A round that answered nothing has no latency to report: a zero would read as "free".
  if (r.requests < 100 || r.errors > 0)
    throw new Error(`wrk against ${target.url}: ${r.requests} requests, ${r.errors} errors in ${seconds} s`);
  return r;
}

const up = await startFakeUpstream();
await up.script({ default: { ttft_ms: 0, tokens: 4, tokens_per_s: 1e6 } });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-overhead-'));
const honePort = freePort(), pkPort = freePort(), honeBPort = freePort();
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
  path.resolve(root, '../shared/models/stories260K.gguf'), '--port', String(honePort), '--quiet', 'true', '--threads', '1',
  '--state-dir', path.join(tmp, 'state-a')],
  { stdio: 'ignore' });
const honeB = HONE_B ? spawn(HONE_B, ['serve', '--config', path.join(tmp, 'hone.toml'), '-m',
  path.resolve(root, '../shared/models/stories260K.gguf'), '--port', String(honeBPort), '--quiet', 'true', '--threads', '1',
  '--state-dir', path.join(tmp, 'state-b')],
  { stdio: 'ignore' }) : null;
const pkMain = path.join(root, 'bench/node/node_modules/@portkey-ai/gateway/build/start-server.js');
if (!fs.existsSync(pkMain)) execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: path.join(root, 'bench/node') });
const portkey = spawn('node', [pkMain, `--port=${pkPort}`, '--headless'], { stdio: 'ignore' });
try {
  await waitFor(`http://127.0.0.1:${honePort}/health`);
  if (honeB) await waitFor(`http://127.0.0.1:${honeBPort}/health`);
  await waitFor(`http://127.0.0.1:${pkPort}/`);
  const json = { 'Content-Type': 'application/json' };
  const targets = {
    direct: { url: `${up.url}/v1/chat/completions`, model: 'm', headers: { ...json, Authorization: 'Bearer sk-bench' } },
    hone: { url: `http://127.0.0.1:${honePort}/v1/chat/completions`, model: 'cloud', headers: json },
    ...(honeB ? { hone_b: { url: `http://127.0.0.1:${honeBPort}/v1/chat/completions`, model: 'cloud', headers: json } } : {}),
    portkey: { url: `http://127.0.0.1:${pkPort}/v1/chat/completions`, model: 'm',
               headers: { ...json, Authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai',
                          'x-portkey-custom-host': `${up.url}/v1` } },
  };
  for (const t of Object.values(targets)) await load(t, 50, 4);  // warm-up
  const results = {};
  for (const c of LEVELS) {
    results[c] = Object.fromEntries(NAMES.map((n) => [n, []]));
    const tput = Object.fromEntries(NAMES.map((n) => [n, []]));
    const failed = Object.fromEntries(NAMES.map((n) => [n, 0]));
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
  // wrk, one connection, interleaved rounds of WRK_SECONDS per path.
  let wrk = null;
  if (WRK_SECONDS > 0 && haveWrk()) {
    wrk = { seconds: WRK_SECONDS, rounds: ROUNDS, runs: Object.fromEntries(NAMES.map((n) => [n, []])) };
    for (let round = 0; round < ROUNDS; ++round) {
      const names = Object.keys(targets);
      if (round % 2) names.reverse();
      for (const name of names) {
        const r = await wrkSerial(targets[name], WRK_SECONDS, tmp);
        wrk.runs[name].push(r);
        process.stderr.write(`wrk round ${round + 1} ${name}: p50 ${r.p50_us} us, p99 ${r.p99_us} us\n`);
      }
    }
    // Each round's own difference from direct, then the mean and spread over rounds.
    const stat = (xs) => {
      const m = xs.reduce((a, b) => a + b, 0) / xs.length;
      const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1));
      return { mean: m, ci95: xs.length > 1 ? (2.0 * sd) / Math.sqrt(xs.length) : null };  // one round: no spread
    };
    wrk.added = {};
    for (const name of NAMES.filter((n) => n !== 'direct')) {
      wrk.added[name] = {
        p50_us: stat(wrk.runs[name].map((r, i) => r.p50_us - wrk.runs.direct[i].p50_us)),
        p99_us: stat(wrk.runs[name].map((r, i) => r.p99_us - wrk.runs.direct[i].p99_us)),
      };
    }
  } else if (WRK_SECONDS > 0) {
    process.stderr.write('wrk not found (apt-get install wrk): the C-client serial figures are skipped\n');
  }
  const host = os.hostname().split('.')[0];
  const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const out = { benchmark: 'router overhead: direct vs hone serve vs Portkey gateway 1.15.2', date: new Date().toISOString(),
                machine: { cpu, cores: os.cpus().length }, requests_per_round: REQUESTS, rounds: ROUNDS, results, wrk };
  const base = path.join(root, 'bench/results', `router_overhead-${host}-${stamp}`);
  fs.writeFileSync(base + '.json', JSON.stringify(out, null, 2));
  const md = [`# ${out.benchmark}`, '', `- date: ${out.date}`, `- machine: ${cpu}, ${os.cpus().length} CPUs (the upstream, the routers and the client share them)`,
    `- ${ROUNDS} interleaved rounds of ${REQUESTS} non-streamed chat requests per path and concurrency; upstream: tests/node/fake_upstream.mjs (timers only)`,
    `- command: \`node bench/router_overhead.mjs --requests ${REQUESTS} --rounds ${ROUNDS} --concurrency ${LEVELS.join(',')} --wrk-seconds ${WRK_SECONDS}${HONE_B ? ' --hone-b ' + HONE_B : ''}\``, '',
    '| clients | path | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s | vs direct | failed |', '|---|---|---|---|---|---|---|---|---|'];
  for (const c of LEVELS) {
    const d = results[c].direct;
    for (const name of NAMES) {
      const r = results[c][name];
      md.push(`| ${c} | ${LABEL[name]} | ${r.p50_ms.toFixed(2)} | ${r.p99_ms.toFixed(2)} | ` +
              `${name === 'direct' ? '-' : (r.p50_ms - d.p50_ms).toFixed(2)} | ${name === 'direct' ? '-' : (r.p99_ms - d.p99_ms).toFixed(2)} | ` +
              `${r.req_per_s.toFixed(0)} | ${(r.req_per_s / d.req_per_s).toFixed(2)}x | ${r.failed} |`);
    }
  }
  if (wrk) {
    md.push('', `Serially with wrk (a C client, 1 connection), ${ROUNDS} interleaved rounds of ${WRK_SECONDS} s per path; ` +
            'added = each round\'s difference from direct, mean ± 95% CI over the rounds:', '',
            '| path | p50 us (rounds) | p99 us (rounds) | added p50 us | added p99 us | errors |', '|---|---|---|---|---|---|');
    const fmt = (x) => x.mean.toFixed(0) + (x.ci95 === null ? ' (1 round)' : ` ± ${x.ci95.toFixed(0)}`);
    for (const name of NAMES) {
      const runs = wrk.runs[name], a = wrk.added[name];
      md.push(`| ${LABEL[name]} | ${runs.map((r) => r.p50_us).join(', ')} | ` +
              `${runs.map((r) => r.p99_us).join(', ')} | ${a ? fmt(a.p50_us) : '-'} | ${a ? fmt(a.p99_us) : '-'} | ${runs.reduce((x, r) => x + r.errors, 0)} |`);
    }
  }
  fs.writeFileSync(base + '.md', md.join('\n') + '\n');
  console.log(md.join('\n'));
} finally {
  hone.kill('SIGTERM');
  if (honeB) honeB.kill('SIGTERM');
  portkey.kill('SIGTERM');
  await up.close();
}
