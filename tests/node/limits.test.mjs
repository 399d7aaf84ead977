// Refusals: API keys, a full queue (429 + Retry-After, 503 on Ollama's API),
// memory admission, explicit load/unload, and /health before anything can serve.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { HONE, modelsDir, startServer, post, sleep, TMP } from './helpers.mjs';

test('API keys: 401 without the right Bearer key, never logged', async () => {
  const server = await startServer(['--models', modelsDir()], { HONE_API_KEYS: 'sk-right-key' });
  try {
    const wrong = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'sk-wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e.status === 401 && e.code === 'invalid_api_key');
    const none = await post(server.url + '/api/generate', { model: 'tiny', prompt: 'x' });
    assert.equal(none.status, 401);
    assert.equal(typeof none.json.error, 'string', 'Ollama envelope on /api');
    const right = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'sk-right-key', maxRetries: 0 });
    const models = await right.models.list();
    assert.ok(models.data.length > 0);
    assert.equal((await fetch(server.url + '/health')).status, 200, '/health needs no key');
    assert.ok(!server.log().includes('sk-right-key') && !server.log().includes('sk-wrong'));
  } finally {
    await server.stop();
  }
});

test('keys are refused on the command line, where every user of the machine can read them', () => {
  for (const [flag, env] of [['--api-keys', 'HONE_API_KEYS'], ['--admin-keys', 'HONE_ADMIN_KEYS']]) {
    const r = spawnSync(HONE, ['serve', '--models', modelsDir(), '--port', '0', flag, 'sk-on-the-command-line'],
                        { encoding: 'utf8', timeout: 20000 });
    assert.notEqual(r.status, 0, `${flag} was accepted`);
    assert.match(r.stderr, new RegExp(`${flag}: keys on the command line .*\\(${env}\\)`));
    assert.ok(!r.stderr.includes('sk-on-the-command-line'), 'the key was echoed');
  }
});

test('a 401 does not leave its body to be read as the next request on the connection', async () => {
  const server = await startServer(['--models', modelsDir()], { HONE_API_KEYS: 'sk-right-key' });
  try {
    const u = new URL(server.url);
    // The body is itself a well-formed, authorized request: smuggled if the server read it as one.
    const inner = 'GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer sk-right-key\r\n\r\n';
    const outer = `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`;
    const got = await new Promise((resolve, reject) => {
      const sock = net.connect(Number(u.port), u.hostname, () => sock.write(outer));
      let data = '';
      sock.on('data', (d) => (data += d));
      sock.on('error', reject);
      setTimeout(() => { sock.destroy(); resolve(data); }, 1500);
    });
    const statuses = [...got.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((m) => m[1]);
    assert.deepEqual(statuses, ['401'], got);
  } finally {
    await server.stop();
  }
});

test('a full queue answers 429 with Retry-After, and 503 on the Ollama API', async () => {
  const server = await startServer(['--models', modelsDir(), '--slots', '1', '--max-queue', '0']);
  try {
    const long = { model: 'stories260K', prompt: 'Once', max_tokens: 2000, stream: true };
    const ac = new AbortController();
    const first = await fetch(server.url + '/v1/completions', { method: 'POST', body: JSON.stringify(long), signal: ac.signal });
    assert.equal(first.status, 200);
    const busy = await post(server.url + '/v1/completions', { ...long, stream: false });
    assert.equal(busy.status, 429);
    assert.equal(busy.headers.get('retry-after'), '1');
    assert.equal(busy.json.error.code, 'rate_limit_exceeded');
    const ollamaBusy = await post(server.url + '/api/generate', { model: 'stories260K', prompt: 'x', stream: false });
    assert.equal(ollamaBusy.status, 503);
    ac.abort();
  } finally {
    await server.stop();
  }
});

test('embedding requests waiting for one model are bounded by --max-queue: 429 with Retry-After', async () => {
  const server = await startServer(['--models', modelsDir(), '--max-queue', '1']);
  try {
    // Loaded first (waiters for a load have a bound of their own).
    const warm = await post(server.url + '/v1/embeddings', { model: 'stories260K', input: 'warm' });
    assert.equal(warm.status, 200);
    // One request of 512 inputs keeps the model's embedding session busy for
    // a while; of the five sent together one runs, one waits, the rest are
    // refused at once.
    const input = Array.from({ length: 512 }, (_, i) => `text number ${i} about a happy dog in the park`);
    const all = await Promise.all(Array.from({ length: 5 }, () =>
      fetch(server.url + '/v1/embeddings', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                              body: JSON.stringify({ model: 'stories260K', input }) })
        .then(async (r) => ({ status: r.status, retry: r.headers.get('retry-after'), body: await r.json() }))));
    const ok = all.filter((r) => r.status === 200), busy = all.filter((r) => r.status === 429);
    assert.equal(ok.length + busy.length, 5, JSON.stringify(all.map((r) => [r.status, r.body.error])));
    assert.ok(ok.length >= 2 && busy.length >= 1, `${ok.length} served, ${busy.length} refused`);
    for (const r of ok) assert.equal(r.body.data.length, 512);
    for (const r of busy) {
      assert.equal(r.retry, '1');
      assert.match(r.body.error.message, /embedding requests already wait/);
    }
  } finally {
    await server.stop();
  }
});

test('load and unload cycles do not grow the server\'s memory', async () => {
  // Loads run on whichever HTTP worker asked; glibc kept each model's freed
  // buffers in that worker's arena, so RSS grew by ~50 MB a cycle here
  // (bench/soak.py: +590 MB/hour) until the pool trimmed after unloading.
  const server = await startServer(['--models', modelsDir()]);
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8'))[1]) / 1024;
  // A new connection each time, so each load may land on another worker.
  const fresh = (path, body) => new Promise((resolve, reject) => {
    const req = http.request(server.url + path, { method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', Connection: 'close' } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
  const cycle = async () => {
    const r = await fresh('/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    assert.equal(r.status, 200, r.text);
    const u = await fresh('/hone/unload', { model: 'tiny' });
    assert.equal(u.status, 200, u.text);
  };
  try {
    for (let i = 0; i < 2; ++i) await cycle();
    const before = rss();
    for (let i = 0; i < 6; ++i) await cycle();
    const grown = rss() - before;
    assert.ok(grown < 60, `RSS grew ${grown.toFixed(0)} MB over 6 load/unload cycles`);
  } finally {
    await server.stop();
  }
});

test('memory admission refuses a model that does not fit, and the server goes on', async () => {
  const server = await startServer(['--models', modelsDir(), '--memory-limit', '12M', '--ctx', '256', '--slots', '1']);
  try {
    const big = await post(server.url + '/v1/completions', { model: 'tiny', prompt: 'x', max_tokens: 2 });
    assert.equal(big.status, 507);
    assert.equal(big.json.error.code, 'insufficient_memory');
    assert.match(big.json.error.message, /MiB/);
    const small = await post(server.url + '/v1/completions', { model: 'stories260K', prompt: 'Once', max_tokens: 2 });
    assert.equal(small.status, 200);
  } finally {
    await server.stop();
  }
});

test('explicit load, pin and unload endpoints; a config file with an alias', async () => {
  const cfg = path.join(TMP, 'serve-node.toml');
  fs.writeFileSync(cfg, `models = "${modelsDir()}"\nkeep_alive = "-1"\n[aliases]\nstory = "stories260K"\n`);
  const server = await startServer(['--config', cfg]);
  try {
    const load = await post(server.url + '/hone/load', { model: 'story', pin: true });
    assert.equal(load.status, 200);
    assert.equal(load.json.model, 'stories260K');
    const ps = await (await fetch(server.url + '/api/ps')).json();
    assert.equal(ps.models[0].name, 'stories260K');
    assert.equal(ps.models[0].pinned, true);
    const r = await post(server.url + '/v1/chat/completions', { model: 'story', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    assert.equal(r.status, 200);
    assert.equal((await post(server.url + '/hone/unload', { model: 'stories260K' })).status, 200);
    assert.equal((await post(server.url + '/hone/unload', { model: 'stories260K' })).status, 404);
    assert.equal((await (await fetch(server.url + '/api/ps')).json()).models.length, 0);
  } finally {
    await server.stop();
  }
});

test('a model that fails to load gets a clear error; /health is 503 when nothing can serve', async () => {
  const dir = path.join(TMP, 'serve-node-broken');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'broken.gguf'), 'not a gguf file at all');
  const server = await startServer(['--models', dir]);
  try {
    assert.equal((await fetch(server.url + '/health')).status, 503);
    const r = await post(server.url + '/v1/completions', { model: 'broken', prompt: 'x' });
    assert.equal(r.status, 500);
    assert.ok(r.json.error.message.length > 0);
  } finally {
    await server.stop();
  }
});

test('pinned models load at start-up; /health is 503 until they are resident', async () => {
  const server = await startServer(['--models', modelsDir(), '--pin', 'stories260K']);
  try {
    // Right after the port is bound the load may still run: 503 then, 200 once it is in.
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; ++i) {
      status = (await fetch(server.url + '/health')).status;
      if (status !== 200) {
        assert.equal(status, 503);
        await sleep(100);
      }
    }
    assert.equal(status, 200);
    // Resident without any request having asked for it, and pinned.
    const ps = await (await fetch(server.url + '/api/ps')).json();
    assert.deepEqual(ps.models.map((m) => [m.name, m.pinned]), [['stories260K', true]]);
  } finally {
    await server.stop();
  }
});

// A raw request with any Host and headers (fetch will not set Host).
function rawPost(url, path, body, headers) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, method: 'POST', headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, text, json: JSON.parse(text || 'null') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('web pages cannot reach a loopback server: Host and Origin checks, no text/plain bodies', async () => {
  const server = await startServer(['--models', modelsDir(), '--allowed-origins', 'https://app.example']);
  try {
    const body = JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
    const json = { 'Content-Type': 'application/json' };
    const ok = await rawPost(server.url, '/v1/completions', body, json);
    assert.equal(ok.status, 200, ok.text);
    // DNS rebinding: the page's own name resolves to 127.0.0.1, the Host header says so.
    const rebound = await rawPost(server.url, '/v1/completions', body, { ...json, Host: 'attacker.example:8080' });
    assert.equal(rebound.status, 403);
    assert.match(rebound.json.error.message, /Host 'attacker\.example:8080'.*--allowed-hosts/);
    assert.equal((await rawPost(server.url, '/api/generate', body, { ...json, Host: 'attacker.example' })).status, 403);
    // A cross-site page: its Origin is refused; localhost pages and the configured origin are not.
    const csrf = await rawPost(server.url, '/v1/completions', body, { ...json, Origin: 'https://evil.example' });
    assert.equal(csrf.status, 403);
    assert.match(csrf.json.error.message, /origin 'https:\/\/evil\.example'.*--allowed-origins/);
    for (const origin of ['http://localhost:5173', 'http://127.0.0.1:3000', 'https://app.example']) {
      const r = await rawPost(server.url, '/v1/completions', body, { ...json, Origin: origin });
      assert.equal(r.status, 200, origin);
    }
    // A browser's body must say JSON, even from an allowed origin: a form or
    // text/plain is what a page may send without a CORS preflight.
    for (const type of ['text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded']) {
      const r = await rawPost(server.url, '/v1/completions', body, { 'Content-Type': type, Origin: 'http://localhost:5173' });
      assert.equal(r.status, 415, type);
      assert.match(r.json.error.message, /must be JSON/);
    }
    // Programs send no Origin: fetch with a string body (text/plain) and curl -d still work.
    for (const type of ['text/plain;charset=UTF-8', 'application/x-www-form-urlencoded']) {
      assert.equal((await rawPost(server.url, '/v1/completions', body, { 'Content-Type': type })).status, 200, type);
    }
    // /health stays open (load balancers).
    assert.equal((await fetch(server.url + '/health', { headers: { Origin: 'https://evil.example' } })).status, 200);
  } finally {
    await server.stop();
  }
  // Bound beyond loopback, names are the operator's business: any Host passes.
  const open = await startServer(['--models', modelsDir(), '--host', '0.0.0.0']);
  try {
    const port = new URL(open.url).port;
    const r = await rawPost(`http://127.0.0.1:${port}`, '/v1/completions', JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 1 }), { 'Content-Type': 'application/json', Host: 'hone.internal' });
    assert.equal(r.status, 200, r.text);
  } finally {
    await open.stop();
  }
});

test('SIGTERM drains: /health 503 at once, new requests 503, short streams finish, long ones end with an error event, exit 0', async () => {
  const server = await startServer(['--models', modelsDir(), '--drain-timeout', '2']);
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  // Reads a stream to its end; `started` resolves with its first piece of text.
  const read = (stream) => {
    let started;
    const first = new Promise((r) => (started = r));
    const done = (async () => {
      const out = { text: '', finish: null, error: null };
      try {
        for await (const c of stream) {
          out.text += c.choices[0]?.delta?.content ?? '';
          out.finish = c.choices[0]?.finish_reason ?? out.finish;
          if (out.text) started();
        }
      } catch (e) {
        out.error = e;
      }
      started();
      return out;
    })();
    return [done, first];
  };
  // A schema whose string must be long: the model cannot end early.
  const endless = { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object', properties: { s: { type: 'string', minLength: 1500 } }, required: ['s'] } } };
  const long = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3500, response_format: endless, stream: true });
  const short = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Once' }], max_tokens: 40, stream: true });
  const [longDone, longStarted] = read(long), [shortDone, shortStarted] = read(short);
  // Both generate before the signal (they are in flight, not queued).
  await Promise.all([longStarted, shortStarted]);
  const t0 = Date.now();
  const logAt = server.log().length;
  server.signal('SIGTERM');
  await server.waitLog(/hone serve: draining/, { from: logAt, ms: 10000 });
  // The drain begins just after its log line: /health turns 503 within a few polls,
  // while the long stream still holds the server up.
  let health;
  for (let i = 0; i < 50; ++i) {
    health = await fetch(server.url + '/health');
    if (health.status === 503) break;
    await health.arrayBuffer();
    await sleep(20);
  }
  assert.equal(health.status, 503);
  assert.deepEqual(await health.json(), { status: 'draining' });
  const refused = await post(server.url + '/v1/chat/completions', { model: 'stories260K', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get('retry-after'), '1');
  const s = await shortDone;
  assert.equal(s.error, null, 'the short stream finished normally');
  assert.ok(['stop', 'length'].includes(s.finish));
  const l = await longDone;
  assert.ok(l.error, 'the long stream ended with an error event, not a clean end');
  assert.match(String(l.error.message), /shutting down/);
  assert.ok(l.text.length > 0);
  assert.equal(await server.exited, 0);
  // The bound is the feature: the long stream ran until --drain-timeout 2 cut it
  // (at least 2 s after the signal), and was cut then, long before its 3,500
  // tokens were written (the upper bound leaves a loaded 2-core machine 10 s).
  const took = Date.now() - t0;
  assert.ok(took >= 1900 && took < 12000, `drained in ${took} ms with --drain-timeout 2`);
  assert.match(server.log(), /hone serve: \d+ request\(s\) cut short at the drain deadline/);
});

test('a second signal stops at once', async () => {
  const server = await startServer(['--models', modelsDir(), '--drain-timeout', '60']);
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  // Greedy, so the answer is the same 4000 tokens every run: sampled, a
  // random-weight model sometimes stops early, and a server with nothing left
  // to drain exits 0 before the second signal.
  const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4000,
                                                       temperature: 0, stream: true });
  let ended = false, started;
  const first = new Promise((r) => (started = r));
  const reading = (async () => { try { for await (const _ of stream) started(); } catch {} ended = true; started(); })();
  await first;
  assert.equal(ended, false, 'the stream must still run when the signals come');
  const t0 = Date.now();
  const logAt = server.log().length;
  server.signal('SIGTERM');
  // The second signal once the first has begun the drain (not two at once).
  await server.waitLog(/hone serve: draining/, { from: logAt, ms: 10000 });
  server.signal('SIGTERM');
  assert.equal(await server.exited, 1);
  // At once, not after --drain-timeout 60 (a loaded machine gets 20 s).
  assert.ok(Date.now() - t0 < 20000, `exited ${Date.now() - t0} ms after the signals`);
  assert.doesNotMatch(server.log(), /cut short at the drain deadline/);
  await reading;
});

test('bounded parameters: each violation is a 400 that names the field and its limit', async () => {
  const server = await startServer(['--models', modelsDir(), '--ctx', '512']);
  try {
    const chat = { model: 'stories260K', messages: [{ role: 'user', content: 'Once' }], max_tokens: 4 };
    const cases = [
      [{ max_tokens: 2 ** 32 + 5 }, /'max_tokens' must be an integer of at most 2147483647/],
      [{ max_tokens: 100000 }, /'max_tokens' 100000 is more than the context of 512 tokens/],
      [{ repeat_last_n: 1000000 }, /'repeat_last_n' must be within \[-1, 512\]/],
      [{ seed: 2 ** 40 }, /'seed' must be within/],
      [{ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }, /'stop' has 17 entries; at most 16/],
      [{ messages: Array.from({ length: 4097 }, () => ({ role: 'user', content: 'x' })) }, /'messages' has 4097 entries; at most 4096/],
    ];
    for (const [extra, re] of cases) {
      const r = await post(server.url + '/v1/chat/completions', { ...chat, ...extra });
      assert.equal(r.status, 400, JSON.stringify(extra).slice(0, 60) + ' ' + r.text.slice(0, 200));
      assert.match(r.json.error.message, re);
    }
    // JSON has no Infinity; 1e999 is refused whether the parser or the field check sees it.
    const inf = await post(server.url + '/v1/chat/completions', JSON.stringify(chat).replace('"max_tokens":4', '"max_tokens":4,"presence_penalty":1e999'));
    assert.equal(inf.status, 400);
    assert.match(inf.json.error.message, /'presence_penalty' must be a finite number|not valid JSON/);
    const prompts = await post(server.url + '/v1/completions', { model: 'stories260K', prompt: Array.from({ length: 65 }, () => 'x') });
    assert.equal(prompts.status, 400);
    assert.match(prompts.json.error.message, /'prompt' has 65 entries; at most 64/);
    const inputs = await post(server.url + '/v1/embeddings', { model: 'stories260K', input: Array.from({ length: 2049 }, () => 'x') });
    assert.equal(inputs.status, 400);
    assert.match(inputs.json.error.message, /'input' has 2049 entries; at most 2048/);
    const ollama = await post(server.url + '/api/generate', { model: 'stories260K', prompt: 'x', stream: false, options: { num_predict: 2 ** 33 } });
    assert.equal(ollama.status, 400);
    assert.match(ollama.json.error, /num_predict/);
    // Found by fuzz_ollama_request: a keep_alive of ".m" threw out of the duration parser (a 500).
    for (const keep_alive of ['.m', '9'.repeat(400)]) {
      const dot = await post(server.url + '/api/generate', { model: 'stories260K', prompt: 'x', stream: false, keep_alive });
      assert.equal(dot.status, 400, dot.text);
      assert.match(dot.json.error, /bad duration/);
    }
    assert.equal((await fetch(server.url + '/health')).status, 200);
  } finally {
    await server.stop();
  }
});
