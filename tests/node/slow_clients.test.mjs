// Slow and idle clients on the API port: the connection gate (an epoll loop,
// src/api/connection_gate.h) holds every connection until its request is
// whole, so thousands of them take no worker and a new request is answered
// at once; connections that have sent nothing stay in the kernel
// (--defer-accept). Also the per-address cap and the open-files limit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http from 'node:http';
import { spawn } from 'node:child_process';
import { startServer, modelsDir, sleep, HONE } from './helpers.mjs';

function connect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.once('connect', () => resolve(s));
    s.once('error', () => resolve(s));
  });
}

async function timed(url, init) {
  const t0 = performance.now();
  const agent = new http.Agent({ keepAlive: false });
  const res = await new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(u, { method: init?.method ?? 'GET', agent, headers: init?.headers ?? {} }, (r) => {
      let text = '';
      r.on('data', (d) => (text += d));
      r.on('end', () => resolve({ status: r.statusCode, text }));
    });
    req.on('error', reject);
    req.end(init?.body);
  });
  return { ...res, ms: performance.now() - t0 };
}

async function gauge(url, name) {
  const text = await (await fetch(url + '/metrics')).text();
  const m = new RegExp(`^${name} ([0-9]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test('2,000 slow connections (header trickle, body drip, idle) take no worker: /health and a chat answer at once', async () => {
  // 667 trickle, 667 drip, 666 idle: the idle ones never reach hone (the
  // kernel holds them, --defer-accept) until they send a request.
  const own = await startServer(['--models', modelsDir(), '--threads', '1']);
  const port = Number(new URL(own.url).port);
  const socks = [];
  let timer = null;
  try {
    const body = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x'.repeat(800) }], max_tokens: 1 });
    const kinds = ['trickle', 'drip', 'idle'];
    for (let i = 0; i < 2000; i += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, () => connect(port)));
      batch.forEach((s, j) => {
        s.kind = kinds[(i + j) % 3];
        if (s.kind === 'trickle') s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
        if (s.kind === 'drip') {
          s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
                  `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
          s.sent = 10;
        }
        socks.push(s);
      });
    }
    // Each slow client sends one more byte every 500 ms: never silent for
    // --read-timeout, never done.
    timer = setInterval(() => {
      for (const s of socks) {
        if (s.destroyed) continue;
        if (s.kind === 'trickle') s.write('a');
        if (s.kind === 'drip' && s.sent < body.length - 1) s.write(body[s.sent++]);
      }
    }, 500);
    const open = await gauge(own.url, 'hone_http_connections_open');
    assert.ok(open >= 1334 && open <= 1334 + 5, `${open} connections open, the 1,334 that sent bytes expected (+ this scrape)`);
    const waiting = await gauge(own.url, 'hone_http_connections_waiting');
    assert.ok(waiting >= 1334 - 5, `${waiting} connections waiting in the gate`);
    const health = [];
    const chat = [];
    for (let i = 0; i < 5; ++i) {
      const h = await timed(own.url + '/health');
      assert.equal(h.status, 200);
      health.push(h.ms);
      const c = await timed(own.url + '/v1/chat/completions', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }) });
      assert.equal(c.status, 200, c.text);
      assert.equal(JSON.parse(c.text).usage.completion_tokens, 1);
      chat.push(c.ms);
    }
    console.log(`health ms: ${health.map((x) => x.toFixed(1))}; chat ms: ${chat.map((x) => x.toFixed(1))}`);
    // Before the gate, 50 such clients held /health for the 30 s header
    // deadline. Margins for a loaded 2-core CI machine; bench/slow_clients.py
    // measures the latency against llama-server at 10,000.
    assert.ok(median(health) < 250, `/health took ${health.map((x) => x.toFixed(0)).join(', ')} ms`);
    assert.ok(median(chat) < 1000, `a one-token chat took ${chat.map((x) => x.toFixed(0)).join(', ')} ms`);
    assert.equal(socks.filter((s) => s.destroyed).length, 0, 'the server closed slow connections within their deadlines');
    // An idle connection that speaks at last is served like any other.
    const idle = socks.filter((s) => s.kind === 'idle').slice(0, 20);
    const answers = await Promise.all(idle.map((s) => new Promise((resolve) => {
      let data = '';
      s.on('data', (d) => (data += d));
      s.on('close', () => resolve(data));
      s.write('GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    })));
    for (const a of answers) assert.match(a, /^HTTP\/1\.1 200 OK\r\n/);
  } finally {
    clearInterval(timer);
    for (const s of socks) s.destroy();
  }
  // Their closes reach the gate: nothing stays counted.
  let open = null;
  for (let i = 0; i < 50 && open !== 1; ++i) {
    open = await gauge(own.url, 'hone_http_connections_open');
    if (open !== 1) await sleep(100);
  }
  assert.equal(open, 1, 'only the scrape itself is open');
  await own.stop();
});

test('--max-connections-per-client: past the cap a connection gets 429 naming the flag; others still connect', async () => {
  const own = await startServer(['--models', modelsDir(), '--max-connections-per-client', '5']);
  const port = Number(new URL(own.url).port);
  // Each sends the start of a request: a silent connection stays in the
  // kernel (--defer-accept) and counts for nothing.
  const speak = async () => { const s = await connect(port); s.write('GET /health HTTP/1.1\r\n'); return s; };
  const held = await Promise.all(Array.from({ length: 5 }, speak));
  try {
    await sleep(100);  // the five are counted before the sixth arrives
    const sixth = await speak();
    const answer = await new Promise((resolve) => {
      let data = '';
      sixth.on('data', (d) => (data += d));
      sixth.on('close', () => resolve(data));
    });
    assert.match(answer, /^HTTP\/1\.1 429 Too Many Requests\r\n/);
    assert.match(answer, /Retry-After: 1\r\n/);
    const err = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error;
    assert.equal(err.code, 'too_many_connections');
    assert.match(err.message, /this address holds 5 open connections \(--max-connections-per-client\)/);
    // Once one closes, the address may connect again (the gate sees the close
    // within a loop turn).
    held.pop().destroy();
    let metrics = { status: 0 };
    for (let i = 0; i < 50 && metrics.status !== 200; ++i) {
      metrics = await timed(own.url + '/metrics');
      if (metrics.status !== 200) await sleep(100);
    }
    assert.equal(metrics.status, 200, metrics.text);
    // At least the sixth; a slow machine may refuse a scrape before the close is seen.
    assert.match(metrics.text, /hone_http_connections_refused_total\{reason="per_client"\} [1-9]\d*\n/);
  } finally {
    for (const s of held) s.destroy();
    await own.stop();
  }
});

test('--defer-accept: a connection that sends nothing is not accepted; with --defer-accept 0 it is', async () => {
  for (const [flags, expected] of [[[], 0], [['--defer-accept', '0'], 10]]) {
    const own = await startServer(['--models', modelsDir(), ...flags]);
    const socks = await Promise.all(Array.from({ length: 10 }, () => connect(Number(new URL(own.url).port))));
    try {
      let open = null;
      for (let i = 0; i < 20 && open !== expected + 1; ++i) {
        if (i > 0) await sleep(50);
        open = await gauge(own.url, 'hone_http_connections_open');
      }
      assert.equal(open, expected + 1, `flags [${flags}]: silent connections counted by hone (+ this scrape)`);
    } finally {
      for (const s of socks) s.destroy();
      await own.stop();
    }
  }
});

test('the open-files soft limit is raised to the hard limit at start, with a log line', async () => {
  const proc = spawn('prlimit', ['--nofile=256:4096', HONE, 'serve', '--port', '0', '--models', modelsDir()],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => (log += d));
  const url = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('did not start:\n' + log)), 20000);
    proc.stderr.on('data', () => {
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) { clearTimeout(t); resolve(m[1]); }
    });
  });
  try {
    assert.match(log, /open-files limit raised from 256 to 4096 \(the hard limit\)/);
    const limits = (await import('node:fs')).readFileSync(`/proc/${proc.pid}/limits`, 'utf8');
    assert.match(limits, /Max open files\s+4096\s+4096/);
    assert.equal((await fetch(url + '/health')).status, 200);
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => proc.on('exit', r));
  }
});
