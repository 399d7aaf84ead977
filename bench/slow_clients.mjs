#!/usr/bin/env node
// Ten thousand slow connections on the API port: hone serve against
// llama-server (the peer, built from the same pinned tree), same model, same
// slots, same run. Issue 27 item 1.
//
// Each repetition starts both servers fresh (alternating which goes first),
// warms the model with one chat, reads the server's VmRSS, then opens
// --connections connections in three kinds, a third each:
//   trickle  sends a request line and part of a header, then one header byte
//            every second (a slowloris: headers that never end);
//   drip     sends whole headers with Content-Length: 1000 and ten bytes of
//            body, then one body byte every second;
//   idle     connects and sends nothing; reconnected when the server closes it
//            (both close an idle connection after 5 s), so the count stays up.
//            hone leaves these in the kernel (--defer-accept, 30 s by
//            default) until the kernel hands them over at ~31 s and hone's
//            idle deadline closes them 5 s later: the 45 s window holds one
//            such burst of 3,333 accepts and closes.
// With them open it measures, for --seconds [45]: GET /health on a fresh
// connection every 100 ms, and a one-token chat on a fresh connection every
// 250 ms (each with a 5 s timeout); and VmRSS. Before the slow connections
// open, the same chats run for 5 s on the quiet server: the baseline that
// tells the connections' cost from the model's own time on shared cores. Reported per server and rep:
// connections the client holds open, /health and chat p50 / p99 / max and
// the share under 100 ms, RSS growth per open connection. Then means ± 95% CI
// and the ratio of hone's /health p99 to llama-server's.
//
// The load generator is one Node process on the same cores. The slow
// connections send their bytes at random phases within each second (a
// lockstep burst of 6,666 writes stalled its own event loop by tens of ms),
// and the probes run on a worker thread of their own (bench/
// slow_clients_probe.mjs), so that the driver's lag is not counted as the
// server's. With --pin the process runs on the last CPU and the servers on
// the others (their default threads: the CPUs they have), as when the slow
// clients are other machines.
// Needs an open-files limit above --connections (ulimit -n). SLOW_DEBUG=1
// prints each chat over 90 ms with its time since the connections opened.
//
// Usage: node bench/slow_clients.mjs [--connections 10000] [--reps 3] [--seconds 45]
//          [--model models/qwen2.5-0.5b.Q4_K_M.gguf] [--servers hone,llama-server] [--slots 4] [--threads 2] [--pin]
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { arg, pct, meanCi, sleep, freePort, peerServer } from './common.mjs';
import { request } from './slow_clients_probe.mjs';

const root = path.resolve(import.meta.dirname, '..');
const HONE = arg('hone', path.join(root, 'build/hone'));
const MODEL = path.resolve(arg('model', path.join(root, 'models/qwen2.5-0.5b.Q4_K_M.gguf')));
const CONNECTIONS = Number(arg('connections', 10000)), REPS = Number(arg('reps', 3));
const SECONDS = Number(arg('seconds', 45));
const CHAT_EVERY_MS = 250;
const PIN = process.argv.includes('--pin') && os.cpus().length > 1;
const LAST_CPU = os.cpus().length - 1;
const SLOTS = arg('slots', '4'), THREADS = arg('threads', PIN ? String(LAST_CPU) : '2');
if (PIN) execFileSync('taskset', ['-a', '-p', '-c', String(LAST_CPU), String(process.pid)], { stdio: 'ignore' });
const SERVERS = arg('servers', 'hone,llama-server').split(',');
if (!fs.existsSync(MODEL)) {
  console.error(`no model at ${MODEL}: run ./setup.sh or pass --model`);
  process.exit(1);
}
const LLAMA_SERVER = peerServer(SERVERS);

const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

const children = new Set();
process.on('exit', () => { for (const p of children) p.kill('SIGKILL'); });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(1));

async function start(kind) {
  const port = await freePort();
  const args = kind === 'hone'
    ? ['serve', '-m', MODEL, '--port', String(port), '--slots', SLOTS, '--threads', THREADS, '--quiet', 'true']
    : ['-m', MODEL, '--port', String(port), '-np', SLOTS, '-c', String(4096 * Number(SLOTS)), '-t', THREADS];
  const bin = kind === 'hone' ? HONE : LLAMA_SERVER;
  const proc = spawn(PIN ? 'taskset' : bin, PIN ? ['-c', `0-${LAST_CPU - 1}`, bin, ...args] : args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.add(proc);
  let log = '';
  proc.stderr.on('data', (d) => { log = (log + d).slice(-20000); });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; ++i) {
    if (proc.exitCode !== null) throw new Error(`${kind} exited:\n${log}`);
    if ((await request(url + '/health')).status === 200) break;
    await sleep(100);
  }
  return { kind, url, port, proc, stop: () => new Promise((r) => { proc.on('exit', r); proc.kill('SIGKILL'); children.delete(proc); }) };
}

// The probes, on their own thread: {chat, health} samples of {status, ms}.
function probe(url, seconds, health) {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('./slow_clients_probe.mjs', import.meta.url),
                         { workerData: { url, chatBody, seconds, health, chatEveryMs: CHAT_EVERY_MS } });
    w.once('message', resolve);
    w.once('error', reject);
  });
}

const chatBody = JSON.stringify({ model: path.basename(MODEL, '.gguf'), max_tokens: 1, temperature: 0,
                                  messages: [{ role: 'user', content: 'Say hello.' }] });
const dripBody = JSON.stringify({ model: path.basename(MODEL, '.gguf'), max_tokens: 1,
                                  messages: [{ role: 'user', content: 'x'.repeat(940) }] });

// Holds `n` slow connections of the three kinds until close() is called.
function slowClients(port, n) {
  const socks = new Set();
  let closing = false, reconnects = 0;
  const open = (kind) => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.kind = kind;
    s.phase = Math.floor(Math.random() * 50);
    s.on('error', () => {});
    s.on('close', () => {
      socks.delete(s);
      if (!closing && kind === 'idle') { ++reconnects; open(kind); }  // keep the count up
    });
    s.once('connect', () => {
      if (kind === 'trickle') s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
      if (kind === 'drip') {
        s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
                `Content-Length: ${dripBody.length}\r\n\r\n${dripBody.slice(0, 10)}`);
        s.sent = 10;
      }
      socks.add(s);
      resolve();
    });
    s.once('error', resolve);
  });
  const kinds = ['trickle', 'drip', 'idle'];
  // Each connection sends its byte once a second at its own phase, in 50
  // slots of 20 ms: independent clients do not write in step, and one burst
  // of 6,666 writes would stall this thread (not the server) for tens of ms.
  let tick = 0;
  const timer = setInterval(() => {
    const slot = tick++ % 50;
    for (const s of socks) {
      if (s.phase !== slot) continue;
      if (s.kind === 'trickle') s.write('a');
      if (s.kind === 'drip' && s.sent < dripBody.length - 1) s.write(dripBody[s.sent++]);
    }
  }, 20);
  return {
    async fill() {
      for (let i = 0; i < n; i += 250)
        await Promise.all(Array.from({ length: Math.min(250, n - i) }, (_, j) => open(kinds[(i + j) % 3])));
    },
    count: () => socks.size,
    reconnects: () => reconnects,
    close() { closing = true; clearInterval(timer); for (const s of socks) s.destroy(); },
  };
}

async function runOne(kind) {
  const s = await start(kind);
  const slow = slowClients(s.port, CONNECTIONS);
  try {
    await request(s.url + '/v1/chat/completions', chatBody);  // loaded and warm
    const { chat: quiet } = await probe(s.url, 5, false);
    const rss0 = rssKiB(s.proc.pid);
    const t0 = performance.now();
    await slow.fill();
    const fillS = (performance.now() - t0) / 1000;
    const held = [];
    let rssPeak = rss0;
    const probes = probe(s.url, SECONDS, true);
    for (const end = performance.now() + SECONDS * 1000; performance.now() < end; await sleep(100)) {
      held.push(slow.count());
      rssPeak = Math.max(rssPeak, rssKiB(s.proc.pid));
    }
    const { chat, health } = await probes;
    if (process.env.SLOW_DEBUG) for (const c of chat) if (c.ms > 90) console.error(`slow chat ${c.ms.toFixed(0)} ms at +${((c.at - performance.timeOrigin - t0) / 1000).toFixed(2)} s after fill start`);
    const stat = (xs) => {
      const ms = xs.map((x) => x.ms);
      return { p50: pct(ms, 0.5), p99: pct(ms, 0.99), max: Math.max(...ms),
               ok: xs.filter((x) => x.status === 200 && x.ms < 100).length / xs.length,
               failed: xs.filter((x) => x.status !== 200).length };
    };
    const open = pct(held, 0.5);
    return { kind, fillS, open, reconnects: slow.reconnects(), health: stat(health), chat: stat(chat), quiet: stat(quiet),
             rssPerConn: ((rssPeak - rss0) * 1024) / Math.max(1, open), rssGrowthMiB: (rssPeak - rss0) / 1024 };
  } finally {
    slow.close();
    await s.stop();
  }
}

const rows = [];
for (let rep = 0; rep < REPS; ++rep) {
  const order = (rep % 2 ? ['llama-server', 'hone'] : ['hone', 'llama-server']).filter((k) => SERVERS.includes(k));
  for (const kind of order) {
    const r = await runOne(kind);
    rows.push({ rep, ...r });
    console.error(`rep ${rep} ${kind}: ${r.open} open (filled in ${r.fillS.toFixed(1)} s); /health p50 ${r.health.p50.toFixed(1)} ` +
                  `p99 ${r.health.p99.toFixed(1)} ms, ${r.health.failed} failed; chat p50 ${r.chat.p50.toFixed(0)} ` +
                  `p99 ${r.chat.p99.toFixed(0)} ms, ${r.chat.failed} failed; RSS +${r.rssGrowthMiB.toFixed(1)} MiB`);
  }
}

const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
let md = `# ${CONNECTIONS} slow connections on the API port: hone serve vs llama-server\n\n`;
md += `Machine: ${cpu}, ${os.cpus().length} logical CPUs; model ${path.basename(MODEL)}; ${SLOTS} slots, ${THREADS} threads; ` +
      `${SECONDS} s measured per run;${PIN ? ` servers on CPUs 0-${LAST_CPU - 1}, the load generator on CPU ${LAST_CPU} (--pin);` : ''} ${REPS} repetitions, order alternating; ${new Date().toISOString()}.\n` +
      `Command: \`node bench/slow_clients.mjs ${process.argv.slice(2).join(' ')}\`\n\n`;
md += 'Connections: a third trickle header bytes, a third drip body bytes (1 byte/s each), a third idle (reconnected when closed). ' +
      '/health every 100 ms and a one-token chat every 250 ms, each on a fresh connection with a 5 s timeout ' +
      '(a timeout counts as failed, at 5000 ms). RSS growth: peak VmRSS while they are open, less VmRSS after warm-up, per open connection. ' +
      'Quiet chat: the same chats for 5 s before the slow connections open (the model\'s own time on these cores).\n\n';
md += '| rep | server | open | /health p50 / p99 / max ms | /health < 100 ms | failed | chat p50 / p99 / max ms | chat < 100 ms | failed | quiet chat p50 / p99 ms | RSS growth | per connection |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n';
for (const r of rows) {
  md += `| ${r.rep} | ${r.kind} | ${r.open} | ${f(r.health.p50)} / ${f(r.health.p99)} / ${f(r.health.max, 0)} | ${f(100 * r.health.ok)}% | ` +
        `${r.health.failed} | ${f(r.chat.p50, 0)} / ${f(r.chat.p99, 0)} / ${f(r.chat.max, 0)} | ${f(100 * r.chat.ok)}% | ${r.chat.failed} | ` +
        `${f(r.quiet.p50, 0)} / ${f(r.quiet.p99, 0)} | ${f(r.rssGrowthMiB)} MiB | ${f(r.rssPerConn, 0)} B |\n`;
}
md += '\n| server | /health p99 ms (mean ± 95% CI) | /health < 100 ms | chat p99 ms | chat < 100 ms | quiet chat p99 ms | RSS per connection |\n|---|---|---|---|---|---|---|\n';
const by = {};
for (const kind of ['hone', 'llama-server'].filter((k) => SERVERS.includes(k))) {
  const mine = rows.filter((r) => r.kind === kind);
  const h = meanCi(mine.map((r) => r.health.p99)), hok = meanCi(mine.map((r) => 100 * r.health.ok));
  const c = meanCi(mine.map((r) => r.chat.p99)), cok = meanCi(mine.map((r) => 100 * r.chat.ok));
  const m = meanCi(mine.map((r) => r.rssPerConn)), q = meanCi(mine.map((r) => r.quiet.p99));
  by[kind] = mine;
  md += `| ${kind} | ${f(h.mean)} ± ${f(h.ci95)} | ${f(hok.mean)}% ± ${f(hok.ci95)} | ${f(c.mean, 0)} ± ${f(c.ci95, 0)} | ` +
        `${f(cok.mean)}% ± ${f(cok.ci95)} | ${f(q.mean, 0)} ± ${f(q.ci95, 0)} | ${f(m.mean, 0)} ± ${f(m.ci95, 0)} B |\n`;
}
if (by.hone && by['llama-server']) {
  const ratio = meanCi(by.hone.map((r, i) => r.health.p99 / by['llama-server'][i].health.p99));
  md += `\nhone / llama-server /health p99, per repetition: ${f(ratio.mean, 3)} ± ${f(ratio.ci95, 3)}.\n`;
}
const out = path.join(root, 'bench/results', `slow_clients-vm-${new Date().toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-')}.md`);
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, md);
console.log(md);
console.error(`written to ${out}`);
