// The HTTP layer's own limits (cpp-httplib 0.54, vendored in the pinned
// llama.cpp tree): header caps, body limits that hold for chunked and
// compressed bodies, a read timeout, and the connection bound with 503 while
// /health still answers. Raw sockets, because fetch would refuse to send most
// of these requests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import http from 'node:http';
import zlib from 'node:zlib';
import { spawn } from 'node:child_process';
import { startServer, modelsDir, sleep, HONE } from './helpers.mjs';

let server, port;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--max-body', '64K', '--max-connections', '20',
                              '--read-timeout', '2', '--slots', '2', '--max-queue', '4']);
  port = Number(new URL(server.url).port);
});
after(async () => server && server.stop());

// Writes `head` then each of `parts` (stopping at the first write error), and
// resolves with what came back and how many bytes were sent.
function exchange(head, parts = [], options = {}) {
  return exchangeOn(port, head, parts, options);
}

function exchangeOn(port, head, parts = [], { wait = 5000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '', sent = 0, done = false;
    const finish = (why) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ data, sent, why, status: Number((/^HTTP\/1\.1 (\d+)/.exec(data) || [])[1] || 0) });
    };
    const timer = setTimeout(() => finish('timeout'), wait);
    sock.on('data', (d) => (data += d));
    sock.on('end', () => finish('end'));
    sock.on('close', () => finish('close'));
    sock.on('error', () => finish('error'));
    sock.on('connect', async () => {
      sock.write(head);
      sent += head.length;
      for (const p of typeof parts === 'function' ? parts() : parts) {
        if (done || sock.destroyed) break;
        const ok = sock.write(p);
        sent += p.length;
        if (!ok) await new Promise((r) => { sock.once('drain', r); sock.once('close', r); });
      }
    });
  });
}

function body(text) {
  const i = text.indexOf('\r\n\r\n');
  return JSON.parse(text.slice(i + 4));
}

async function healthMs(url = server.url) {
  const t0 = performance.now();
  const status = await new Promise((resolve) => {
    const req = http.get(url + '/health', { agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => { req.destroy(); resolve('timeout'); });
    req.on('error', () => resolve('error'));
  });
  return { status, ms: performance.now() - t0 };
}

test('a header line over 8 KiB and more than 100 headers get 400 naming the limits', async () => {
  const long = await exchange(`GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`);
  assert.equal(long.status, 400, long.data);
  assert.match(body(long.data).error.message, /header line over 8 KiB.*more than 100 headers/);
  assert.match(long.data, /X-Request-Id: req-/);
  let many = 'GET /v1/models HTTP/1.1\r\nHost: localhost\r\n';
  for (let i = 0; i < 150; ++i) many += `X-H${i}: 1\r\n`;
  const counted = await exchange(many + '\r\n');
  assert.equal(counted.status, 400, counted.data);
  // Under the caps, the same request is served.
  const fine = await exchange('GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Ok: ' +
                              'a'.repeat(4000) + '\r\n\r\n');
  assert.equal(fine.status, 200, fine.data);
});

test('a 300 MiB header is refused long before it is all sent, and the server stays up', async () => {
  const mib = Buffer.alloc(1 << 20, 'a');
  const parts = function* () { for (let i = 0; i < 300; ++i) yield mib; };
  const r = await exchange('GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Huge: ', parts, { wait: 20000 });
  assert.notEqual(r.why, 'timeout', 'the server kept reading a 300 MiB header');
  assert.ok(r.sent < 64 * (1 << 20), `the server read ${(r.sent / (1 << 20)).toFixed(0)} MiB of one header`);
  if (r.status) assert.equal(r.status, 400, r.data);
  assert.equal((await healthMs()).status, 200);
});

test('the body limit holds for chunked bodies (413), and compressed bodies are refused (415)', async () => {
  const big = JSON.stringify({ model: 'stories260K', prompt: 'a'.repeat(100 * 1024), max_tokens: 1 });
  let chunked = '';
  for (let i = 0; i < big.length; i += 8000) {
    const piece = big.slice(i, i + 8000);
    chunked += `${piece.length.toString(16)}\r\n${piece}\r\n`;
  }
  chunked += '0\r\n\r\n';
  const head = 'POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
               'Transfer-Encoding: chunked\r\n\r\n';
  const tooBig = await exchange(head, [chunked]);
  assert.equal(tooBig.status, 413, tooBig.data);
  assert.equal(body(tooBig.data).error.code, 'payload_too_large');
  assert.match(body(tooBig.data).error.message, /--max-body \(64K\)/);
  // A small chunked body is read and served.
  const small = JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
  const ok = await exchange(head.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'),
                            [`${small.length.toString(16)}\r\n${small}\r\n0\r\n\r\n`]);
  assert.equal(ok.status, 200, ok.data);
  // 10 MB of prompt in 10 KB of gzip: a bomb if it were inflated without a cap.
  const gz = zlib.gzipSync(JSON.stringify({ model: 'stories260K', prompt: 'a'.repeat(10_000_000) }));
  assert.ok(gz.length < 64 * 1024);
  const bomb = await exchange('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
                              `Content-Encoding: gzip\r\nContent-Length: ${gz.length}\r\n\r\n`, [gz]);
  assert.equal(bomb.status, 415, bomb.data);
  assert.match(body(bomb.data).error.message, /Content-Encoding is not supported/);
  assert.equal((await healthMs()).status, 200);
});

test('a client silent past --read-timeout is dropped', async () => {
  const t0 = performance.now();
  const r = await exchange('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n',
                           [], { wait: 10000 });
  const s = (performance.now() - t0) / 1000;
  assert.notEqual(r.why, 'timeout', 'a half-sent request held its connection for 10 s');
  // The read timeout, then the 5 s idle keep-alive wait httplib makes before it closes.
  assert.ok(s > 1.5 && s < 9, `dropped after ${s.toFixed(1)} s with --read-timeout 2`);
});

test('past --max-connections, API requests get 503 with Retry-After while /health and /metrics answer', async () => {
  // --max-connections bounds the requests on a worker (a connection still
  // sending its request holds none: see the slow-client tests below). Three
  // long streams hold the three.
  const own = await startServer(['--models', modelsDir(), '--max-connections', '3', '--slots', '2',
                                 '--max-queue', '4', '--threads', '1']);
  const p = Number(new URL(own.url).port);
  const ask = (head) => exchangeOn(p, head);
  const streams = [];
  try {
    const started = [];
    for (let i = 0; i < 3; ++i) {
      const s = net.connect(p, '127.0.0.1');
      s.on('error', () => {});
      const req = JSON.stringify({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 4000, temperature: 0, stream: true });
      s.write('POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
              `Content-Length: ${req.length}\r\n\r\n${req}`);
      started.push(new Promise((resolve) => s.once('data', resolve)));
      streams.push(s);
    }
    await Promise.all(started);
    const refused = await ask('GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.equal(refused.status, 503, refused.data);
    assert.match(refused.data, /Retry-After: 1\r\n/);
    assert.equal(body(refused.data).error.code, 'overloaded');
    assert.match(body(refused.data).error.message, /--max-connections/);
    assert.notEqual(refused.why, 'timeout', 'the refused connection was kept open');
    const ollama = await ask('GET /api/tags HTTP/1.1\r\nHost: localhost\r\n\r\n');
    assert.equal(ollama.status, 503, ollama.data);
    for (let i = 0; i < 5; ++i) {
      const h = await healthMs(own.url);
      assert.equal(h.status, 200);
      assert.ok(h.ms < 100, `/health took ${h.ms.toFixed(0)} ms past the bound`);
    }
    const metrics = await ask('GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    assert.equal(metrics.status, 200);
    for (const s of streams) s.destroy();
    // Each stream's worker sees its client gone within a token or two.
    let back;
    for (let i = 0; i < 50; ++i) {
      back = await ask('GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      if (back.status === 200) break;
      await sleep(100);
    }
    assert.equal(back.status, 200, back.data);
  } finally {
    for (const s of streams) s.destroy();
    await own.stop();
  }
});

test('a burst of streaming clients past the queue: each gets 200 or 429 with Retry-After, none is dropped', async () => {
  // 2 slots + 4 queued may stream; the other clients of 18 (under the
  // connection bound of 20) must be refused by the scheduler's queue bound,
  // not left waiting or reset.
  const req = JSON.stringify({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 400, stream: true });
  const one = () => new Promise((resolve) => {
    const r = http.request(server.url + '/v1/completions', {
      method: 'POST', agent: false, headers: { 'Content-Type': 'application/json' } }, (res) => {
      const got = { status: res.statusCode, retry: res.headers['retry-after'], text: '' };
      res.on('data', (d) => (got.text += d));
      res.on('end', () => resolve(got));
      res.on('error', (e) => resolve({ ...got, error: String(e) }));
    });
    r.on('error', (e) => resolve({ status: 0, error: String(e) }));
    r.end(req);
  });
  const all = await Promise.all(Array.from({ length: 18 }, one));
  const ok = all.filter((r) => r.status === 200);
  const busy = all.filter((r) => r.status === 429);
  assert.equal(ok.length + busy.length, all.length, JSON.stringify(all.filter((r) => ![200, 429].includes(r.status))));
  assert.ok(ok.length >= 6 && busy.length >= 1, `${ok.length} served, ${busy.length} refused`);
  for (const r of busy) assert.equal(r.retry, '1');
  for (const r of ok) assert.match(r.text, /data: \[DONE\]/);
});

test('150 slow clients do not delay /health on the API port (default --max-connections)', async () => {
  const own = await startServer(['--models', modelsDir()]);
  const u = new URL(own.url);
  const stalled = [];
  try {
    for (let i = 0; i < 150; ++i) {
      const s = net.connect(Number(u.port), u.hostname);
      s.on('error', () => {});
      s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n');
      stalled.push(s);
    }
    await sleep(500);
    const metrics = await fetch(own.url + '/metrics');
    assert.equal(metrics.status, 200);
    assert.match(await metrics.text(), /hone_server_draining 0/);
    for (let i = 0; i < 10; ++i) {
      const { status, ms } = await healthMs(own.url);
      assert.equal(status, 200);
      assert.ok(ms < 100, `/health took ${ms.toFixed(0)} ms behind 150 slow clients`);
    }
  } finally {
    for (const s of stalled) s.destroy();
    await own.stop();
  }
});

test('a second server on a port in use fails to start, naming the port, instead of sharing it', async () => {
  // httplib's default SO_REUSEPORT let a second process bind the same port and
  // silently take half of the connections.
  const proc = spawn(HONE, ['serve', '--models', modelsDir(), '--port', String(port), '--threads', '1'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => (log += d));
  const code = await new Promise((resolve) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); resolve('still running'); }, 15000);
    proc.on('exit', (c) => { clearTimeout(timer); resolve(c); });
  });
  assert.notEqual(code, 0, log);
  assert.notEqual(code, 'still running', `a second server bound port ${port}:\n${log}`);
  assert.match(log, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}`));
  assert.equal((await fetch(server.url + '/health')).status, 200);
});

test('the accept backlog holds a burst of 800 connects: none waits for a handshake retry', async () => {
  // httplib listens with a backlog of 128; past it the kernel drops
  // handshakes and clients retry after ~1 s (a /health probe too). hone
  // widens it to --max-connections + the probe reserve (up to somaxconn).
  // The server is stopped while the burst arrives, so only the kernel's
  // queue holds the connections (a busy accept thread, as under a real burst).
  const own = await startServer(['--models', modelsDir()]);
  const u = new URL(own.url);
  const socks = [];
  try {
    own.signal('SIGSTOP');
    const times = await Promise.all(Array.from({ length: 800 }, () => new Promise((resolve) => {
      const t0 = performance.now();
      const s = net.connect(Number(u.port), u.hostname);
      socks.push(s);
      const timer = setTimeout(() => resolve(Infinity), 2500);
      s.on('error', () => { clearTimeout(timer); resolve(Infinity); });
      s.on('connect', () => { clearTimeout(timer); resolve(performance.now() - t0); });
    })));
    own.signal('SIGCONT');
    const slow = times.filter((ms) => ms > 900).length;
    assert.equal(slow, 0, `${slow} of 800 connects took > 900 ms (a dropped handshake)`);
  } finally {
    own.signal('SIGCONT');
    for (const s of socks) s.destroy();
  }
  try {
    assert.equal((await fetch(own.url + '/health')).status, 200);
  } finally {
    await own.stop();
  }
});

// --- request deadlines (slowloris): the whole headers, the whole request ---

// Sends `parts` one every `everyMs` (each well under --read-timeout) and
// resolves with how long the server let the connection live.
function drip(port, parts, everyMs) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const sock = net.connect(port, '127.0.0.1');
    let data = '', i = 0, timer = null;
    const done = () => { clearInterval(timer); resolve({ ms: performance.now() - t0, data, sent: i }); };
    sock.on('data', (d) => (data += d));
    sock.on('close', done);
    sock.on('error', () => {});
    sock.on('connect', () => {
      timer = setInterval(() => {
        if (i < parts.length) sock.write(parts[i++]);
      }, everyMs);
    });
    setTimeout(() => sock.destroy(), 20000);
  });
}

test('a client that drips its headers or its body is closed at --header-timeout / --body-timeout', async () => {
  const own = await startServer(['--models', modelsDir(), '--header-timeout', '2', '--body-timeout', '4']);
  const p = Number(new URL(own.url).port);
  try {
    // One header byte every 300 ms: each read is quick, the headers never end.
    const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Slow: ' + 'a'.repeat(200);
    const h = await drip(p, [...head], 300);
    assert.ok(h.ms > 1500 && h.ms < 4500, `closed after ${h.ms.toFixed(0)} ms (--header-timeout 2)`);
    assert.ok(h.sent < head.length, 'closed before the headers were done');
    // Headers at once, then one body byte every 300 ms of a 200-byte body.
    const body = '{"model":"tiny","messages":[{"role":"user","content":"' + 'b'.repeat(150) + '"}]}';
    const parts = ['POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
                   `Content-Length: ${body.length}\r\n\r\n`, ...body];
    const b = await drip(p, parts, 300);
    assert.ok(b.ms > 3500 && b.ms < 6500, `closed after ${b.ms.toFixed(0)} ms (--body-timeout 4)`);
    assert.ok(b.sent < parts.length, 'closed before the body was done');
    const m = await (await fetch(own.url + '/metrics')).text();
    assert.match(m, /hone_http_request_deadline_closed_total 2\b/);
    assert.match(own.log(), /closed the connection from 127\.0\.0\.1:\d+: its request headers took over 2 s \(--header-timeout\)/);
    assert.match(own.log(), /its request body took over 4 s \(--body-timeout\)/);
    assert.equal((await fetch(own.url + '/health')).status, 200);
  } finally {
    await own.stop();
  }
});

test('the deadlines restart after each answer on a kept-alive connection, and never cut an answer short', async () => {
  const own = await startServer(['--models', modelsDir(), '--header-timeout', '1', '--body-timeout', '1', '--threads', '1']);
  const p = Number(new URL(own.url).port);
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const ask = (body) => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: p, path: '/v1/chat/completions', method: 'POST', agent,
        headers: { 'Content-Type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, text, socket: req.socket }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
    // A streamed answer that takes longer than both deadlines is not cut.
    const t0 = performance.now();
    const long = await ask({ model: 'tiny', stream: true, max_tokens: 1200, temperature: 0,  // greedy: all 1200, every run
                             messages: [{ role: 'user', content: 'Once upon a time' }] });
    const ms = performance.now() - t0;
    assert.equal(long.status, 200);
    assert.match(long.text, /data: \[DONE\]/, `the stream ended well after ${ms.toFixed(0)} ms`);
    assert.ok(ms > 1500, `the stream took ${ms.toFixed(0)} ms, longer than the deadlines`);
    // Three requests on one connection, 600 ms apart: each within 1 s of the last answer.
    let first = null;
    for (let i = 0; i < 3; ++i) {
      await sleep(600);
      const r = await ask({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(r.status, 200);
      first ??= r.socket;
      assert.equal(r.socket, first, 'the same kept-alive connection');
    }
    agent.destroy();
  } finally {
    await own.stop();
  }
});

// Inference runs niced (--inference-nice, default 5): when decode holds every
// core, the HTTP workers, the probes and the refusals of a burst preempt it.
// The decode thread sets it before its first step, so its OpenMP team
// inherits it; every other thread stays at the server's own niceness.
test('decode threads run at --inference-nice, every other thread at the server\'s niceness', async () => {
  const niceIn = (file) => {
    const stat = fs.readFileSync(file, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);  // field 19: nice
  };
  const niceOf = (pid) => fs.readdirSync(`/proc/${pid}/task`).map((t) => niceIn(`/proc/${pid}/task/${t}/stat`));
  const ask = (url) => fetch(url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 4 }) }).then((r) => r.json());
  await ask(server.url);
  const nice = niceOf(server.pid);
  const base = niceIn(`/proc/${server.pid}/stat`);  // a test run may itself be niced
  if (base < 5) {
    // --threads 2: the decode thread and one OpenMP worker.
    assert.equal(nice.filter((n) => n === 5).length, 2, JSON.stringify(nice));
    assert.equal(nice.filter((n) => n !== 5 && n !== base).length, 0, JSON.stringify(nice));
  }
  const plain = await startServer(['--models', modelsDir(), '--inference-nice', '0']);
  try {
    await ask(plain.url);
    const all = niceOf(plain.pid);
    assert.ok(all.every((n) => n === niceIn(`/proc/${plain.pid}/stat`)), JSON.stringify(all));
  } finally {
    await plain.stop();
  }
  const bad = spawn(HONE, ['serve', '--port', '0', '--models', modelsDir(), '--inference-nice', '20'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  bad.stderr.on('data', (d) => (err += d));
  const code = await new Promise((r) => bad.on('exit', r));
  assert.notEqual(code, 0);
  assert.match(err, /inference-nice must be 0\.\.19/);
});
