// The router's fault matrix through the official `openai` client: one
// `hone serve` with [[upstream]] and [[route]] tables, a scriptable upstream
// (fake_upstream.mjs) for the faults, and a second real `hone serve` on
// loopback as the happy-path cloud. Every request is bounded in time: each one
// ends complete or with a clear error, none hangs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { modelsDir, startServer, post, sleep, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const KEYS = ['sk-a', 'sk-b'];
const LOCAL = 'stories260K';
const MSGS = [{ role: 'user', content: 'Tell me a story about a cat' }];
const RETRY = 'retry = { max_attempts = 3, base_backoff = "10ms", max_backoff = "50ms", deadline = "20s" }';
// The breaker of every upstream but `flaky` never opens in these tests.
const NO_BREAKER = 'breaker = { consecutive_failures = 1000, failure_rate = 1.0, min_volume = 100000, cooldown = "1s" }';

let up, server, second, client, deadPort, configFile;

// Rejects when `p` has not settled within `ms`: nothing in this file may hang.
function within(p, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

const fingerprint = (k) => 'key-' + crypto.createHash('sha256').update(k).digest('hex').slice(0, 8);

// The text the fixture streams for `text` in `n` pieces (its words, cycled).
function fixtureText(text, n) {
  const base = text.split(' ');
  return Array.from({ length: n }, (_, i) => base[i % base.length] + (i + 1 < n ? ' ' : '')).join('');
}

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;  // nothing listens there now: connections are refused
}

function config() {
  const upstream = (name, url, extra = []) =>
    ['[[upstream]]', `name = "${name}"`, `base_url = "${url}"`, 'health_interval = "1h"', ...extra].join('\n');
  const route = (name, targets, policy, extra = [RETRY]) =>
    ['[[route]]', `name = "${name}"`, `targets = ${JSON.stringify(targets)}`, `policy = "${policy}"`, ...extra].join('\n');
  const keys = `api_keys = ${JSON.stringify(KEYS)}`;
  const fake = up.url + '/v1';
  return [
    upstream('cloud', fake, [keys, 'first_byte_timeout = "5s"', 'idle_timeout = "5s"', NO_BREAKER]),
    upstream('rl', fake, [keys, NO_BREAKER]),
    upstream('authy', fake, [keys, NO_BREAKER]),
    upstream('authz', fake, [keys, NO_BREAKER]),
    upstream('slow', fake, [keys, 'first_byte_timeout = "500ms"', NO_BREAKER]),
    upstream('mapped', fake, [keys, 'models = { "alias-m" = "vendor-m" }', NO_BREAKER]),
    upstream('flaky', fake, [keys, 'breaker = { consecutive_failures = 2, failure_rate = 1.0, min_volume = 100000, cooldown = "1s" }']),
    upstream('cutoff', fake, [keys, 'breaker = { consecutive_failures = 2, failure_rate = 1.0, min_volume = 100000, cooldown = "1h" }']),
    upstream('gone1', fake, [keys, 'first_byte_timeout = "5s"', NO_BREAKER]),
    upstream('gone2', fake, [keys, 'first_byte_timeout = "5s"', NO_BREAKER]),
    upstream('stall', fake, [keys, 'idle_timeout = "300ms"', NO_BREAKER]),
    upstream('capped', fake, [keys, 'max_concurrent = 1', NO_BREAKER]),
    upstream('dead', `http://127.0.0.1:${deadPort}/v1`, [keys, 'connect_timeout = "1s"', NO_BREAKER]),
    upstream('hone2', second.url + '/v1', [NO_BREAKER]),
    upstream('hone2c', second.url + '/v1', ['continuation = true', NO_BREAKER]),
    route('failover', ['cloud:cloud-m', `local:${LOCAL}`], 'failover'),
    route('cloud-only', ['cloud:cloud-m'], 'failover'),
    route('support', [`local:${LOCAL}`, 'cloud:cloud-m'], 'local_first'),
    route('embed-tight', [`local:${LOCAL}`, 'cloud:cloud-m'], 'local_first', ['ttft_slo = "0.001ms"', RETRY]),
    route('embed-cloud-listed-first', ['cloud:cloud-m', `local:${LOCAL}`], 'local_first'),
    route('w-cloud', ['cloud:cloud-m', `local:${LOCAL}`], 'weighted', ['weights = [1, 0]', RETRY]),
    route('w-local', ['cloud:cloud-m', `local:${LOCAL}`], 'weighted', ['weights = [0, 1]', RETRY]),
    route('rl', ['rl:rl-m'], 'failover'),
    route('auth', ['authy:auth-m'], 'failover'),
    route('auth-all', ['authz:authz-m', `local:${LOCAL}`], 'failover'),
    route('slow', ['slow:slow-m', `local:${LOCAL}`], 'failover',
      ['retry = { max_attempts = 2, base_backoff = "10ms", max_backoff = "50ms", deadline = "20s" }']),
    route('mapped', ['mapped:alias-m'], 'failover'),
    route('refused', ['dead:dead-m', `local:${LOCAL}`], 'failover',
      ['retry = { max_attempts = 2, base_backoff = "10ms", max_backoff = "50ms", deadline = "20s" }']),
    route('flaky-only', ['flaky:flaky-m'], 'failover', ['retry = { max_attempts = 1, deadline = "20s" }']),
    route('flaky-fo', ['flaky:flaky-m', `local:${LOCAL}`], 'failover', ['retry = { max_attempts = 1, deadline = "20s" }']),
    route('cutoff', ['cutoff:cutoff-m'], 'failover', ['retry = { max_attempts = 1, deadline = "500ms" }']),
    route('gone1', ['gone1:gone1-m'], 'failover'),
    route('gone2', ['gone2:gone2-m'], 'failover'),
    route('stall', ['stall:stall-m', `local:${LOCAL}`], 'failover'),
    route('capped', ['capped:capped-m', `local:${LOCAL}`], 'failover'),
    route('hone2', ['hone2:stories260K'], 'failover'),
    route('no-cont', ['cloud:cloud-m', 'hone2:stories260K'], 'failover'),
    route('cont-remote', ['cloud:cloud-m', 'hone2c:stories260K'], 'failover'),
  ].join('\n\n') + '\n';
}

before(async () => {
  up = await startFakeUpstream();
  second = await startServer(['--models', modelsDir(), '--slots', '2', '--ctx', '512']);
  deadPort = await freePort();
  fs.mkdirSync(TMP, { recursive: true });
  configFile = path.join(TMP, `route-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, config());
  // One slot and a queue of one: a burst overflows the local_first route.
  server = await startServer(['--config', configFile, '--models', modelsDir(), '--slots', '1', '--max-queue', '1', '--ctx', '512']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 30000 });
});
after(async () => {
  if (server) await server.stop();
  if (second) await second.stop();
  if (up) await up.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

// --- helpers over the client ---

const chat = (model, extra = {}, ms = 20000) =>
  within(client.chat.completions.create({ model, messages: MSGS, max_tokens: 12, temperature: 0, ...extra }), ms, `chat ${model}`);

// Reads a stream to its end; an error thrown by the client is returned, not thrown.
async function readStream(stream, onChunk = () => {}) {
  const out = { text: '', finish: null, usage: null, error: null, chunks: 0 };
  try {
    for await (const c of stream) {
      if (c.usage) out.usage = c.usage;
      if (c.choices?.length) {
        const piece = c.choices[0].delta?.content ?? '';
        if (piece) {
          out.text += piece;
          ++out.chunks;
        }
        out.finish = c.choices[0].finish_reason ?? out.finish;
      }
      if (onChunk(out) === false) break;
    }
  } catch (e) {
    out.error = e;
  }
  return out;
}

const streamChat = (model, extra = {}, ms = 20000) =>
  within((async () => readStream(await client.chat.completions.create({
    model, messages: MSGS, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true }, ...extra,
  })))(), ms, `stream ${model}`);

// The local model's own greedy answer, asked directly (not through a route).
async function localAnswer(extra = {}, base = server.url) {
  const r = await within(post(base + '/v1/chat/completions', {
    model: LOCAL, messages: MSGS, max_tokens: 12, temperature: 0, ...extra,
  }), 20000, 'direct local request');
  assert.equal(r.status, 200, r.text);
  return r.json.choices[0].message.content;
}

const chatPosts = async (model) => (await up.log()).filter(
  (e) => e.method === 'POST' && e.path.endsWith('/chat/completions') && (!model || e.model === model));

async function routes() {
  const r = await within(fetch(server.url + '/hone/routes'), 5000, 'GET /hone/routes');
  assert.equal(r.status, 200);
  const text = await r.text();
  return { text, json: JSON.parse(text) };
}

function routeTarget(json, route, target) {
  const r = json.routes.find((x) => x.name === route);
  assert.ok(r, `route ${route} in /hone/routes`);
  const t = r.targets.find((x) => x.target === target);
  assert.ok(t, `target ${target} of route ${route} in /hone/routes: ${JSON.stringify(r)}`);
  return t;
}

async function metricsText() {
  return (await within(fetch(server.url + '/metrics'), 5000, 'GET /metrics')).text();
}

// Lines of one metric as {labels, value}.
function metricLines(text, name) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const m = /^[^{]+\{([^}]*)\}\s+(\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of m[1].matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]] = l[2];
    out.push({ labels, value: Number(m[2]), line });
  }
  return out;
}
const metricSum = (text, name, pred = () => true) =>
  metricLines(text, name).filter((l) => pred(l.labels, l.line)).reduce((s, l) => s + l.value, 0);

async function poll(fn, ms, step = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v || Date.now() >= end) return v;
    await sleep(step);
  }
}

async function fresh(script) {
  await up.reset();
  if (script) await up.script(script);
}

// --- the happy path ---

test('a route answers from the upstream: non-streamed and streamed, messages and limits passed on', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'cloud says hello to you' } });
  const r = await chat('failover');
  assert.equal(r.choices[0].message.content, fixtureText('cloud says hello to you', 12));
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 12);

  const s = await streamChat('failover');
  assert.equal(s.error, null);
  assert.equal(s.text, fixtureText('cloud says hello to you', 12));
  assert.equal(s.finish, 'length');
  assert.ok(s.usage, 'include_usage gives a usage chunk');
  assert.equal(s.usage.completion_tokens, 12);

  const log = await chatPosts();
  assert.equal(log.length, 2, JSON.stringify(log));
  for (const e of log) {
    assert.equal(e.model, 'cloud-m');
    assert.ok(KEYS.includes(e.key), `a configured key was sent (${e.key})`);
    assert.deepEqual(e.messages.map((m) => ({ role: m.role, content: m.content })), MSGS);
    assert.equal(e.max_tokens, 12);
    assert.equal(e.disconnected, false);
  }
  assert.notEqual(log[0].key, log[1].key, 'requests are spread over the keys');
});

test('route names are listed by GET /v1/models next to the local models', { timeout: 30000 }, async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  for (const n of ['failover', 'cloud-only', 'support', LOCAL]) assert.ok(ids.includes(n), `${n} in ${ids}`);
});

test('an upstream model map renames the model sent', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'mapped' } });
  const r = await chat('mapped');
  assert.equal(r.choices[0].message.content, fixtureText('mapped', 12));
  const log = await chatPosts();
  assert.equal(log.length, 1);
  assert.equal(log[0].model, 'vendor-m');
});

test('a second hone serve as the cloud: the route returns its answer', { timeout: 60000 }, async () => {
  const direct = await localAnswer({}, second.url);
  const before = (second.log().match(/"path":"\/v1\/chat\/completions"/g) || []).length;
  const r = await chat('hone2', {}, 30000);
  assert.equal(r.choices[0].message.content, direct);
  const s = await streamChat('hone2', {}, 30000);
  assert.equal(s.error, null);
  assert.equal(s.text, direct);
  assert.ok(['stop', 'length'].includes(s.finish));
  // The log line is written as the answer ends: give it a moment.
  const count = () => (second.log().match(/"path":"\/v1\/chat\/completions"/g) || []).length;
  await poll(() => count() - before >= 2, 2000);
  assert.equal(count() - before, 2, 'both requests reached the second server');
});

test('the completions API through a route to the second hone serve', { timeout: 60000 }, async () => {
  const d = await within(post(second.url + '/v1/completions', { model: LOCAL, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 }),
    20000, 'direct completion');
  assert.equal(d.status, 200, d.text);
  const r = await within(client.completions.create({ model: 'hone2', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 }),
    30000, 'routed completion');
  assert.equal(r.choices[0].text, d.json.choices[0].text);
});

test('other model names still go to the local models', { timeout: 30000 }, async () => {
  await fresh();
  const r = await chat(LOCAL);
  assert.equal(r.choices[0].message.content, await localAnswer());
  assert.equal((await chatPosts()).length, 0);
});

// --- policies ---

test('local_first: under no load the local model answers and the upstream is not contacted', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'should not be used' } });
  const expected = await localAnswer();
  const r = await chat('support');
  assert.equal(r.choices[0].message.content, expected);
  const s = await streamChat('support');
  assert.equal(s.error, null);
  assert.equal(s.text, expected);
  assert.equal((await chatPosts()).length, 0);
});

test('local_first: a burst beyond the local queue overflows to the upstream, none lost', { timeout: 60000 }, async () => {
  await fresh({ default: { text: 'overflow went to the cloud', tokens: 24 } });
  const local = await localAnswer({ max_tokens: 24 });
  const cloud = fixtureText('overflow went to the cloud', 24);
  const m0 = await metricsText();
  const logAt = server.log().length;
  const results = await Promise.all(Array.from({ length: 16 }, () => streamChat('support', { max_tokens: 24 }, 40000)));
  for (const [i, r] of results.entries()) {
    assert.equal(r.error, null, `request ${i} failed: ${r.error}`);
    assert.ok(r.text === local || r.text === cloud, `request ${i} is one whole answer: ${JSON.stringify(r.text)}`);
    assert.ok(['stop', 'length'].includes(r.finish), `request ${i} finished (${r.finish})`);
  }
  const toCloud = results.filter((r) => r.text === cloud).length;
  const overflowLines = await poll(() => {
    const n = server.log().slice(logAt).split('\n').filter((l) => l.includes('"model":"support"') && /overflow/.test(l)).length;
    return n >= toCloud ? n : 0;
  }, 2000);
  assert.ok(toCloud >= 1, 'with 1 slot and a queue of 1, some of 16 concurrent requests overflow');
  assert.ok(toCloud < 16, 'the local engine kept some');
  assert.equal((await chatPosts()).length, toCloud, 'each overflow is exactly one upstream request');
  assert.equal(overflowLines, toCloud, 'the log line of each overflowed request gives the overflow reason');
  const m1 = await metricsText();
  const overflow = metricSum(m1, 'hone_route_overflow_total') - metricSum(m0, 'hone_route_overflow_total');
  assert.equal(overflow, toCloud, 'hone_route_overflow_total counts each overflow');
  for (const l of metricLines(m1, 'hone_route_overflow_total')) assert.ok(l.labels.reason, `a reason label: ${l.line}`);
  const { json } = await routes();
  assert.equal(typeof json.overflow_rate, 'number');
  assert.ok(json.overflow_rate > 0 && json.overflow_rate <= 1, `overflow_rate ${json.overflow_rate}`);
});

const embedPosts = async () => (await up.log()).filter((e) => e.method === 'POST' && e.path.endsWith('/embeddings'));

test('local_first embeddings: past the route SLO or the local queue they go to the upstream, none lost', { timeout: 60000 }, async (t) => {
  await fresh({ default: { ttft_ms: 5 } });
  const embed = (model, input) =>
    within(client.embeddings.create({ model, input, encoding_format: 'float' }), 30000, `embeddings ${model}`);
  // No SLO on 'support' and nothing queued: the local model answers.
  const local = await embed('support', 'a cat sat on the mat');
  const dim = local.data[0].embedding.length;
  assert.notEqual(dim, 3, 'the local model, not the upstream (whose vectors have 3 dimensions)');
  assert.equal((await embedPosts()).length, 0);
  // local_first tries the local model first wherever it is listed, as for chat.
  const first = await embed('embed-cloud-listed-first', 'a cat');
  assert.equal(first.data[0].embedding.length, dim, 'local, though the cloud is listed first');
  assert.equal((await embedPosts()).length, 0);
  // An SLO no forward pass can meet: predicted over it, sent on, reason ttft_slo.
  const m0 = await metricsText();
  const cloud = await embed('embed-tight', ['a cat', 'a dog']);
  assert.deepEqual(cloud.data.map((d) => d.embedding), [[1, 0, 0], [1, 0, 0]]);
  const posts = await embedPosts();
  assert.equal(posts.length, 1, 'one upstream request');
  assert.deepEqual(posts[0].inputs, ['a cat', 'a dog']);
  assert.equal(posts[0].model, 'cloud-m');
  const m1 = await metricsText();
  const slo = (t) => metricSum(t, 'hone_route_overflow_total', (l) => l.route === 'embed-tight' && l.reason === 'ttft_slo');
  assert.equal(slo(m1) - slo(m0), 1, 'the overflow is counted with its reason');
  // A burst past one running and one waiting: the rest overflow at admission
  // (or, refused by a full queue, on the way), every one answered whole.
  await fresh({ default: { ttft_ms: 5 } });
  const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  const q0 = metricSum(await metricsText(), 'hone_route_overflow_total', (l) => l.route === 'support');
  const burst = await Promise.all(Array.from({ length: 12 }, () => embed('support', [long, long])));
  for (const [i, r] of burst.entries()) {
    assert.equal(r.data.length, 2, `request ${i}: both vectors`);
    const d = r.data[0].embedding.length;
    assert.ok(d === dim || d === 3, `request ${i}: local (${dim}) or upstream (3) vectors, got ${d}`);
  }
  const toCloud = burst.filter((r) => r.data[0].embedding.length === 3).length;
  t.diagnostic(`${toCloud} of 12 went to the upstream`);
  // 12 at once past one slot and a queue of one: some overflow, and the first is served here.
  assert.ok(toCloud >= 1, 'with 1 slot and a queue of 1, some of 12 concurrent requests overflow');
  assert.ok(toCloud < 12, 'the first of the burst finds the slot free');
  assert.equal((await embedPosts()).length, toCloud, 'each overflow is exactly one upstream request');
  const q1 = metricSum(await metricsText(), 'hone_route_overflow_total', (l) => l.route === 'support');
  assert.equal(q1 - q0, toCloud, 'and each is counted');
});

test('weighted: a weight of 0 sends nothing to that target', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'weighted cloud' } });
  const expected = await localAnswer();
  for (let i = 0; i < 3; ++i) {
    assert.equal((await chat('w-cloud')).choices[0].message.content, fixtureText('weighted cloud', 12));
    assert.equal((await chat('w-local')).choices[0].message.content, expected);
  }
  assert.equal((await chatPosts()).length, 3);
});

test('an upstream at max_concurrent: the next request goes to the next target', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'one at a time', ttft_ms: 1000 } });
  const expected = await localAnswer();
  const first = chat('capped');
  assert.ok(await poll(async () => (await chatPosts()).length === 1, 5000), 'the first request reached the upstream');
  const t0 = Date.now();
  const second_ = await chat('capped');
  assert.ok(Date.now() - t0 < 900, `the second did not wait for the first (${Date.now() - t0} ms)`);
  assert.equal(second_.choices[0].message.content, expected);
  assert.equal((await first).choices[0].message.content, fixtureText('one at a time', 12));
  assert.equal((await chatPosts()).length, 1);
});

// --- retries ---

test('500 and 502 are retried on the same target, then it answers', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'third time lucky' }, queue: [{ status: 500 }, { status: 502 }] });
  const m0 = await metricsText();
  const logAt = server.log().length;
  const r = await chat('failover');
  assert.equal(r.choices[0].message.content, fixtureText('third time lucky', 12));
  const log = await chatPosts();
  assert.deepEqual(log.map((e) => e.status), [500, 502, 200]);
  // The request's log line names the route, the target and the attempts.
  const line = await poll(() => server.log().slice(logAt).split('\n').find((l) => l.includes('"model":"failover"')), 2000);
  assert.ok(line, 'a request log line');
  assert.match(line, /failover/);
  assert.match(line, /cloud:cloud-m/);
  assert.match(line, /attempts\D{0,3}3/);
  const m1 = await metricsText();
  const retries = metricSum(m1, 'hone_route_retries_total') - metricSum(m0, 'hone_route_retries_total');
  assert.ok(retries >= 2, `hone_route_retries_total grew by ${retries}`);
  // One request, whatever its attempts: the two failed ones are attempts.
  const grew = (name, pred) => metricLines(m1, name).filter(pred).reduce((a, l) => a + l.value, 0) -
    metricLines(m0, name).filter(pred).reduce((a, l) => a + l.value, 0);
  const ofRoute = (l) => l.labels.route === 'failover';
  assert.equal(grew('hone_route_requests_total', ofRoute), 1, 'hone_route_requests_total counts the request once');
  assert.equal(grew('hone_route_requests_total', (l) => ofRoute(l) && l.labels.outcome === 'ok'), 1);
  assert.equal(grew('hone_route_attempts_total', (l) => ofRoute(l) && l.labels.outcome === 'server_error'), 2,
    'hone_route_attempts_total counts the two failed attempts');
});

test('503 and 504 on every attempt: the next target (local) answers', { timeout: 30000 }, async () => {
  await fresh({ queue: [{ status: 503 }, { status: 504 }, { status: 500 }, { status: 500 }, { status: 500 }] });
  const expected = await localAnswer();
  const t0 = Date.now();
  const r = await chat('failover');
  assert.equal(r.choices[0].message.content, expected);
  assert.ok(Date.now() - t0 < 5000, `answered in ${Date.now() - t0} ms`);
  const log = await chatPosts();
  assert.deepEqual(log.map((e) => e.status), [503, 504, 500], 'max_attempts = 3 on the upstream, then local');
});

test('400, 404, 413 and 422 are not retried, the next target is not tried, and the client gets that status', { timeout: 30000 }, async () => {
  for (const status of [400, 404, 413, 422]) {
    await fresh({ queue: [{ status }] });
    await assert.rejects(chat('failover'), (e) => {
      assert.equal(e.status, status, `the upstream's ${status} reaches the client: ${e.message}`);
      assert.match(e.message, new RegExp(`answered HTTP ${status}`));
      return true;
    });
    const log = await chatPosts();
    assert.equal(log.length, 1, `one attempt for ${status}: ${JSON.stringify(log.map((e) => e.status))}`);
  }
});

test('429 with Retry-After: the request is retried on the other key and succeeds', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'second key' }, queue: [{ status: 429, retry_after: 1 }] });
  const t0 = Date.now();
  const r = await chat('rl');
  assert.equal(r.choices[0].message.content, fixtureText('second key', 12));
  assert.ok(Date.now() - t0 < 5000, `answered in ${Date.now() - t0} ms`);
  const log = await chatPosts();
  assert.deepEqual(log.map((e) => e.status), [429, 200]);
  assert.notEqual(log[0].key, log[1].key, 'the retry used the other key');
  assert.deepEqual(log.map((e) => e.key).sort(), KEYS);
});

test('429 cools that key for its Retry-After while the other key carries on', { timeout: 30000 }, async () => {
  // A realistic Retry-After (longer than the route's deadline): the healthy
  // key serves at once; the cooling key is not used again.
  await sleep(1100);  // the previous test's 1 s cooling is over
  await fresh({ default: { limited_keys: ['sk-a'], retry_after: 30, text: 'rate limited once' } });
  const t0 = Date.now();
  for (let i = 0; i < 3; ++i) {
    const r = await chat('rl');
    assert.equal(r.choices[0].message.content, fixtureText('rate limited once', 12));
  }
  assert.ok(Date.now() - t0 < 5000, `three requests in ${Date.now() - t0} ms`);
  const log = await chatPosts();
  const a = log.filter((e) => e.key === 'sk-a');
  const b = log.filter((e) => e.key === 'sk-b');
  assert.equal(a.length, 1, `sk-a tried once, then cooling: ${JSON.stringify(log.map((e) => [e.key, e.status]))}`);
  assert.equal(a[0].status, 429);
  assert.equal(b.length, 3);
  assert.ok(b.every((e) => e.status === 200));
  const t = routeTarget((await routes()).json, 'rl', 'rl:rl-m');
  const ka = t.keys.find((k) => k.fingerprint === fingerprint('sk-a'));
  const kb = t.keys.find((k) => k.fingerprint === fingerprint('sk-b'));
  assert.ok(ka && kb, JSON.stringify(t.keys));
  assert.equal(ka.health, 'cooling');
  assert.equal(kb.health, 'ok');
});

test('401 on one key revokes it (alert line) and the request succeeds on the other key', { timeout: 30000 }, async () => {
  await fresh({ default: { bad_keys: ['sk-a'], text: 'the good key' } });
  for (let i = 0; i < 3; ++i) assert.equal((await chat('auth')).choices[0].message.content, fixtureText('the good key', 12));
  const log = await chatPosts();
  const a = log.filter((e) => e.key === 'sk-a');
  assert.equal(a.length, 1, `sk-a used once, then out of rotation: ${JSON.stringify(log.map((e) => [e.key, e.status]))}`);
  assert.equal(a[0].status, 401);
  assert.equal(log.filter((e) => e.key === 'sk-b' && e.status === 200).length, 3);
  const t = routeTarget((await routes()).json, 'auth', 'authy:auth-m');
  assert.equal(t.keys.find((k) => k.fingerprint === fingerprint('sk-a'))?.health, 'revoked', JSON.stringify(t.keys));
  assert.equal(t.keys.find((k) => k.fingerprint === fingerprint('sk-b'))?.health, 'ok');
  const alert = await poll(() => server.log().split('\n').find((l) => /alert/i.test(l) && l.includes(fingerprint('sk-a'))), 2000);
  assert.ok(alert, 'an alert line names the revoked key by its fingerprint');
});

test('every key rejected: the upstream is unavailable and the next target answers', { timeout: 30000 }, async () => {
  await fresh({ default: { bad_keys: KEYS } });
  const expected = await localAnswer();
  const r = await chat('auth-all');
  assert.equal(r.choices[0].message.content, expected);
  const log = await chatPosts();
  assert.deepEqual(log.map((e) => e.key).sort(), KEYS, 'each key tried once');
  const t = routeTarget((await routes()).json, 'auth-all', 'authz:authz-m');
  assert.deepEqual(t.keys.map((k) => k.health), ['revoked', 'revoked']);
  // Now no request reaches the upstream at all.
  assert.equal((await chat('auth-all')).choices[0].message.content, expected);
  assert.equal((await chatPosts()).length, 2);
});

test('SIGHUP reloads the keys: revoked ones are back in rotation', { timeout: 30000 }, async () => {
  await fresh({ default: { bad_keys: KEYS } });
  await chat('auth-all');  // both keys of authz are now revoked
  const before = routeTarget((await routes()).json, 'auth-all', 'authz:authz-m');
  assert.deepEqual(before.keys.map((k) => k.health), ['revoked', 'revoked']);
  await fresh({ default: { text: 'keys are back' } });
  server.signal('SIGHUP');
  const back = await poll(async () => {
    const t = routeTarget((await routes()).json, 'auth-all', 'authz:authz-m');
    return t.keys.every((k) => k.health === 'ok') ? t : null;
  }, 5000);
  assert.ok(back, 'every key ok again within 5 s of SIGHUP');
  const r = await chat('auth-all');
  assert.equal(r.choices[0].message.content, fixtureText('keys are back', 12));
  assert.ok(server.log().includes('config reloaded'), 'the reload is logged');
});

test('connection refused: the next target (local) answers', { timeout: 30000 }, async () => {
  const expected = await localAnswer();
  const t0 = Date.now();
  const r = await chat('refused');
  assert.ok(Date.now() - t0 < 5000, `answered in ${Date.now() - t0} ms`);
  assert.equal(r.choices[0].message.content, expected);
  const s = await streamChat('refused');
  assert.equal(s.error, null);
  assert.equal(s.text, expected);
});

test('an upstream that hangs past first_byte_timeout: the next target answers within seconds', { timeout: 30000 }, async () => {
  await fresh({ default: { hang: true } });
  const expected = await localAnswer();
  const t0 = Date.now();
  const s = await streamChat('slow', {}, 15000);
  const took = Date.now() - t0;
  assert.equal(s.error, null);
  assert.equal(s.text, expected);
  assert.ok(took < 5000, `answered in ${took} ms (first_byte_timeout 500ms, 2 attempts)`);
  const log = await chatPosts();
  assert.ok(log.length >= 1 && log.length <= 2, `1 or 2 attempts at the hanging upstream, saw ${log.length}`);
  const closed = await poll(async () => (await chatPosts()).every((e) => e.disconnected), 2000);
  assert.ok(closed, 'the router closed the hanging requests');
});

// --- circuit breaker ---

test('a call cut by the route\'s own deadline is a timeout with no verdict on the upstream', { timeout: 30000 }, async () => {
  // The upstream's first_byte_timeout is 60 s; the route gives up at 500 ms.
  await fresh({ default: { hang: true } });
  for (let i = 0; i < 3; ++i) {
    const t0 = Date.now();
    const r = await within(post(server.url + '/v1/chat/completions', { model: 'cutoff', messages: MSGS, max_tokens: 12 }), 10000, 'cutoff');
    assert.ok(Date.now() - t0 < 3000, `answered in ${Date.now() - t0} ms`);
    assert.ok(r.status >= 500, r.text);
    assert.match(r.json.error.message, /no response in time/);
    assert.doesNotMatch(r.json.error.message, /cannot connect/);
  }
  // Three cutoffs, a breaker that opens after 2 failures: still closed.
  assert.equal(routeTarget((await routes()).json, 'cutoff', 'cutoff:cutoff-m').breaker, 'closed');
  assert.ok(await poll(async () => (await chatPosts()).every((e) => e.disconnected), 2000), 'the router closed the hanging requests');
});

test('the breaker opens after 2 failures, skips the upstream, then one probe closes it', { timeout: 30000 }, async () => {
  await fresh({ default: { status: 500 } });
  for (let i = 0; i < 2; ++i) {
    await assert.rejects(chat('flaky-only'), (e) => e.status >= 500 || (assert.fail(`a 5xx, got ${e.status}`), false));
  }
  assert.equal((await chatPosts()).length, 2);
  let t = routeTarget((await routes()).json, 'flaky-only', 'flaky:flaky-m');
  assert.equal(t.breaker, 'open');
  const gauge = (text) => metricLines(text, 'hone_route_breaker_state').filter((l) => l.line.includes('flaky'));
  const open = gauge(await metricsText());
  assert.ok(open.length >= 1, 'a breaker gauge for flaky');
  assert.ok(open.every((l) => l.value === 2), open.map((l) => l.line).join('\n'));

  // Every target unavailable: 503 with Retry-After at once, nothing sent.
  const t0 = Date.now();
  const r = await within(post(server.url + '/v1/chat/completions', { model: 'flaky-only', messages: MSGS, max_tokens: 12 }), 5000, '503');
  const took = Date.now() - t0;
  assert.equal(r.status, 503, r.text);
  assert.ok(took < 1000, `503 in ${took} ms`);
  assert.ok(Number(r.headers.get('retry-after')) >= 1, `Retry-After: ${r.headers.get('retry-after')}`);
  assert.ok(r.json?.error, 'an error envelope');
  await assert.rejects(chat('flaky-only'), (e) => e.status === 503);
  // A route with a local target behind the open breaker goes straight there.
  assert.equal((await chat('flaky-fo')).choices[0].message.content, await localAnswer());
  assert.equal((await chatPosts()).length, 2, 'nothing reached the upstream while the breaker was open');

  // After the cooldown: half-open, exactly one probe at a time.
  await sleep(1200);
  t = routeTarget((await routes()).json, 'flaky-only', 'flaky:flaky-m');
  assert.equal(t.breaker, 'half_open');
  assert.ok(gauge(await metricsText()).every((l) => l.value === 1), 'the gauge says half-open');
  await up.script({ default: { text: 'recovered', ttft_ms: 800 } });
  const probe = chat('flaky-only');
  await poll(async () => (await chatPosts()).length === 3, 2000, 20);
  const second503 = await within(post(server.url + '/v1/chat/completions', { model: 'flaky-only', messages: MSGS, max_tokens: 12 }), 5000, 'during the probe');
  assert.equal(second503.status, 503, 'only the probe goes while half-open');
  assert.equal((await probe).choices[0].message.content, fixtureText('recovered', 12));
  assert.equal((await chatPosts()).length, 3);
  t = routeTarget((await routes()).json, 'flaky-only', 'flaky:flaky-m');
  assert.equal(t.breaker, 'closed');
  assert.ok(gauge(await metricsText()).every((l) => l.value === 0));
  await up.script({ default: { text: 'recovered' } });
  assert.equal((await chat('flaky-only')).choices[0].message.content, fixtureText('recovered', 12));
});

// --- mid-stream breaks ---

test('a stream that breaks after bytes reached the client is continued locally, seamlessly', { timeout: 30000 }, async () => {
  const text = 'alpha beta gamma delta epsilon zeta';
  await fresh({ queue: [{ text, tokens: 16, drop_after: 3 }] });
  const prefix = 'alpha beta gamma ';
  const m0 = await metricsText();
  const logAt = server.log().length;
  const s = await streamChat('failover', { max_tokens: 24 });
  assert.equal(s.error, null, `no error: ${s.error}`);
  assert.ok(['stop', 'length'].includes(s.finish), `finish ${s.finish}`);
  assert.ok(s.usage && s.usage.completion_tokens > 3 && s.usage.completion_tokens <= 24,
    `usage counts both parts within max_tokens: ${JSON.stringify(s.usage)}`);
  assert.ok(s.text.startsWith(prefix), `starts with the upstream's 3 pieces: ${JSON.stringify(s.text)}`);
  const rest = s.text.slice(prefix.length);
  assert.ok(rest.length > 0, 'the local model continued');
  assert.equal(s.text.indexOf(prefix, 1), -1, 'nothing duplicated');
  // The local model's own continuation of that partial answer.
  const cont = await within(post(server.url + '/v1/chat/completions', {
    model: LOCAL, max_tokens: 24, temperature: 0, continue_final_message: true,
    messages: [...MSGS, { role: 'assistant', content: prefix }],
  }), 20000, 'direct continuation');
  assert.equal(cont.status, 200, cont.text);
  const direct = cont.json.choices[0].message.content;
  assert.ok(direct.startsWith(rest) || rest.startsWith(direct),
    `the rest is the local continuation:\n  got    ${JSON.stringify(rest)}\n  direct ${JSON.stringify(direct)}`);
  const log = await chatPosts();
  assert.equal(log.length, 1, 'no second upstream attempt after bytes were sent');
  assert.equal(log[0].dropped, true);
  const rec = metricSum(await metricsText(), 'hone_route_midstream_recoveries_total') -
    metricSum(m0, 'hone_route_midstream_recoveries_total');
  assert.equal(rec, 1, 'hone_route_midstream_recoveries_total counts it');
  const said = server.log().slice(logAt).split('\n').filter((l) => /failover/.test(l) && /local:stories260K/.test(l) && /continu|recover/i.test(l));
  assert.ok(said.length >= 1, 'the recovery is logged');
});

test('a non-streamed answer whose upstream stream broke is completed locally', { timeout: 30000 }, async () => {
  await fresh({ queue: [{ text: 'alpha beta gamma delta', tokens: 16, drop_after: 3 }] });
  const r = await chat('failover', { max_tokens: 24 });
  const text = r.choices[0].message.content;
  assert.ok(text.startsWith('alpha beta gamma ') && text.length > 'alpha beta gamma '.length, JSON.stringify(text));
  assert.equal(text.indexOf('alpha beta gamma ', 1), -1);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens <= 24, JSON.stringify(r.usage));
  assert.equal((await chatPosts()).length, 1);
});

test('a broken stream is continued on an upstream that supports continuation', { timeout: 60000 }, async () => {
  const text = 'alpha beta gamma delta epsilon zeta';
  await fresh({ queue: [{ text, tokens: 16, drop_after: 2 }] });
  const prefix = 'alpha beta ';
  const s = await streamChat('cont-remote', { max_tokens: 24 }, 30000);
  assert.equal(s.error, null, `no error: ${s.error}`);
  assert.ok(s.text.startsWith(prefix), JSON.stringify(s.text));
  const rest = s.text.slice(prefix.length);
  assert.ok(rest.length > 0);
  const cont = await within(post(second.url + '/v1/chat/completions', {
    model: LOCAL, max_tokens: 24, temperature: 0, continue_final_message: true,
    messages: [...MSGS, { role: 'assistant', content: prefix }],
  }), 20000, 'direct continuation on the second server');
  const direct = cont.json.choices[0].message.content;
  assert.ok(direct.startsWith(rest) || rest.startsWith(direct), `got ${JSON.stringify(rest)}, direct ${JSON.stringify(direct)}`);
});

test('a broken stream with no target that can continue ends with an explicit error', { timeout: 60000 }, async () => {
  const text = 'alpha beta gamma delta epsilon zeta';
  await sleep(500);  // the previous test's log lines from the second server are in by now
  for (const route of ['cloud-only', 'no-cont']) {
    const before = (second.log().match(/"path":"\/v1\/chat\/completions"/g) || []).length;
    await fresh({ queue: [{ text, tokens: 16, drop_after: 3 }] });
    const s = await streamChat(route, { max_tokens: 24 });
    assert.ok(s.error, `${route}: the client sees an error, not a clean end (got ${JSON.stringify(s.text)}, finish ${s.finish})`);
    assert.ok('alpha beta gamma '.startsWith(s.text), `${route}: only the upstream's pieces: ${JSON.stringify(s.text)}`);
    assert.notEqual(s.finish, 'stop');
    assert.notEqual(s.finish, 'length');
    assert.equal((await chatPosts()).length, 1, `${route}: the upstream was not restarted`);
    await sleep(300);  // a request to the second server would be logged by now
    const afterCount = (second.log().match(/"path":"\/v1\/chat\/completions"/g) || []).length;
    assert.equal(afterCount, before, `${route}: a target without continuation is not spliced in`);
  }
  // On the wire: an `error` object in the SSE stream.
  await fresh({ queue: [{ text, tokens: 16, drop_after: 3 }] });
  const res = await within(fetch(server.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'cloud-only', messages: MSGS, max_tokens: 24, temperature: 0, stream: true }),
  }), 10000, 'raw stream');
  assert.equal(res.status, 200);
  let body = '';
  try {
    body = await within(res.text(), 10000, 'raw stream body');
  } catch (e) {
    assert.fail(`the stream must end with an error event, not a broken connection (${e.message}); got so far: ${body}`);
  }
  const events = body.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)));
  const err = events.find((e) => e.error);
  assert.ok(err, `an error event in the SSE stream:\n${body}`);
  assert.ok(typeof err.error.message === 'string' && err.error.message.length > 0);
  assert.ok(!events.some((e) => e.choices?.some((c) => c.finish_reason === 'stop' || c.finish_reason === 'length')),
    'no clean finish_reason');
});

test('a stream that stalls past idle_timeout after bytes went out is continued locally', { timeout: 30000 }, async () => {
  await fresh({ queue: [{ text: 'alpha beta gamma', tokens: 16, tokens_per_s: 1 }] });
  const t0 = Date.now();
  const s = await streamChat('stall', { max_tokens: 24 });
  assert.equal(s.error, null, `no error: ${s.error}`);
  assert.ok(Date.now() - t0 < 5000, `ended in ${Date.now() - t0} ms`);
  assert.ok(s.text.startsWith('alpha '), JSON.stringify(s.text));
  const rest = s.text.slice('alpha '.length);
  assert.ok(rest.length > 0 && !rest.startsWith('beta'), `continued locally: ${JSON.stringify(s.text)}`);
  const log = await chatPosts();
  assert.equal(log.length, 1);
  assert.ok(await poll(async () => (await chatPosts())[0].disconnected, 2000), 'the stalled request was closed');
});

test('a broken structured-output stream is not spliced: an explicit error', { timeout: 30000 }, async () => {
  await fresh({ queue: [{ text: '{"a": 1, "b": 2}', tokens: 16, drop_after: 2 }] });
  const s = await streamChat('failover', { max_tokens: 24, response_format: { type: 'json_object' } });
  assert.ok(s.error, `an error, not a spliced answer: ${JSON.stringify(s.text)} (finish ${s.finish})`);
  assert.equal((await chatPosts()).length, 1);
});

test('Ollama API: a route answers, and a broken stream with no continuation ends with an error line', { timeout: 30000 }, async () => {
  await fresh({ default: { text: 'ollama via cloud' } });
  const ok = await within(post(server.url + '/api/chat', {
    model: 'cloud-only', messages: MSGS, stream: false, options: { num_predict: 12, temperature: 0 },
  }), 20000, 'ollama chat');
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.message.content, fixtureText('ollama via cloud', 12));
  await fresh({ queue: [{ text: 'alpha beta gamma delta', tokens: 16, drop_after: 3 }] });
  const res = await within(fetch(server.url + '/api/chat', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'cloud-only', messages: MSGS, stream: true, options: { num_predict: 24, temperature: 0 } }),
  }), 10000, 'ollama stream');
  const lines = (await within(res.text(), 10000, 'ollama body')).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(lines.some((l) => typeof l.error === 'string' && l.error.length > 0), `an error line:\n${JSON.stringify(lines)}`);
  assert.ok(!lines.some((l) => l.done === true), 'no clean done line');
  assert.equal(lines.filter((l) => l.message).map((l) => l.message.content).join(''), 'alpha beta gamma ');
});

// --- client disconnects ---

test('a client that leaves a stream cancels the upstream request', { timeout: 30000 }, async () => {
  await fresh({ default: { tokens: 400, tokens_per_s: 5 } });
  const stream = await within(client.chat.completions.create({
    model: 'cloud-only', messages: MSGS, max_tokens: 24, temperature: 0, stream: true,
  }), 10000, 'stream start');
  const r = await within(readStream(stream, (o) => o.chunks < 2), 10000, 'two chunks');  // false ends the loop: the client aborts
  assert.equal(r.error, null);
  assert.equal(r.chunks, 2);
  const t0 = Date.now();
  const gone = await poll(async () => (await chatPosts())[0]?.disconnected, 1500);
  assert.ok(gone, 'the upstream saw the disconnect within 1.5 s');
  assert.ok(Date.now() - t0 < 1500);
});

// Before the upstream's first byte the router is still waiting for its status:
// a client that leaves then must cancel that wait too (first_byte_timeout is 5 s
// here, so only a cancel explains a disconnect within 2 s).
test('a client that aborts a non-streamed request cancels the upstream request', { timeout: 30000 }, async () => {
  await fresh({ default: { ttft_ms: 10000 } });
  const ctl = new AbortController();
  const pending = client.chat.completions.create(
    { model: 'gone1', messages: MSGS, max_tokens: 12, temperature: 0 }, { signal: ctl.signal });
  assert.ok(await poll(async () => (await chatPosts('gone1-m')).length === 1, 5000), 'the request reached the upstream');
  ctl.abort();
  await assert.rejects(within(pending, 5000, 'aborted request'));
  const t0 = Date.now();
  const gone = await poll(async () => (await chatPosts('gone1-m'))[0]?.disconnected, 2000);
  assert.ok(gone, `the upstream saw the disconnect within 2 s`);
  assert.ok(Date.now() - t0 < 2000);
});

test('a client that leaves a stream before its first byte cancels the upstream request', { timeout: 30000 }, async () => {
  await fresh({ default: { ttft_ms: 10000 } });
  const ctl = new AbortController();
  const pending = client.chat.completions.create(
    { model: 'gone2', messages: MSGS, max_tokens: 12, temperature: 0, stream: true }, { signal: ctl.signal });
  assert.ok(await poll(async () => (await chatPosts('gone2-m')).length === 1, 5000), 'the request reached the upstream');
  ctl.abort();
  await assert.rejects(within(pending, 5000, 'aborted stream'));
  const t0 = Date.now();
  const gone = await poll(async () => (await chatPosts('gone2-m'))[0]?.disconnected, 2000);
  assert.ok(gone, `the upstream saw the disconnect within 2 s`);
  assert.ok(Date.now() - t0 < 2000);
});

// --- what operators see ---

test('tools through a route: an Anthropic client, the upstream gets the chat form and its call comes back as tool_use', { timeout: 30000 }, async () => {
  await fresh({ default: { tool_call: { name: 'lookup_order', arguments: '{"order_id": 42}' } } });
  const anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  const tool = { name: 'lookup_order', description: 'Look up an order', input_schema: { type: 'object', properties: { order_id: { type: 'integer' } }, required: ['order_id'] } };
  const ask = { model: 'failover', max_tokens: 64, tools: [tool], tool_choice: { type: 'tool', name: 'lookup_order' }, messages: [{ role: 'user', content: 'Where is order 42?' }] };
  const m = await within(anthropic.messages.create(ask), 20000, 'messages through a route');
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(use.input, { order_id: 42 });
  const streamed = await within(anthropic.messages.stream(ask).finalMessage(), 20000, 'streamed messages through a route');
  assert.deepEqual(streamed.content.find((b) => b.type === 'tool_use').input, { order_id: 42 });
  assert.equal(streamed.stop_reason, 'tool_use');

  const forced = await chatPosts();
  assert.deepEqual(forced[0].tool_choice, { type: 'function', function: { name: 'lookup_order' } });

  // The tool result turn goes up in OpenAI's chat form too.
  await fresh({ default: { text: 'it has shipped' } });
  await within(anthropic.messages.create({ ...ask, tool_choice: undefined, messages: [
    ask.messages[0],
    { role: 'assistant', content: [{ type: 'tool_use', id: use.id, name: 'lookup_order', input: use.input }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"status": "shipped"}' }] },
  ] }), 20000, 'tool result through a route');
  const [first] = await chatPosts();
  assert.deepEqual(first.tools, [{ type: 'function', function: { name: 'lookup_order', parameters: tool.input_schema, description: 'Look up an order' } }]);
  assert.equal(first.tool_choice, undefined);
  assert.equal(first.messages[1].role, 'assistant');
  assert.deepEqual(first.messages[1].tool_calls, [{ id: use.id, type: 'function', function: { name: 'lookup_order', arguments: '{"order_id":42}' } }]);
  assert.deepEqual(first.messages[2], { role: 'tool', content: '{"status": "shipped"}', tool_call_id: use.id });

  // A call numbered out of order (here 10^12) is the upstream's error, not an allocation.
  await fresh({ default: { tool_call: { name: 'lookup_order', arguments: '{"order_id": 1}', index: 1e12 } } });
  const bad = await within(post(server.url + '/v1/chat/completions', { model: 'cloud-only', messages: MSGS, tools: [{ type: 'function', function: { name: 'lookup_order' } }] }), 20000, 'bad index');
  assert.equal(bad.status, 502, bad.text);
  assert.match(bad.json.error.message, /tool call 1000000000000/);
  const s = await streamChat('cloud-only', { tools: [{ type: 'function', function: { name: 'lookup_order' } }] });
  assert.ok(s.error, 'the stream ends with an error event');
  assert.equal((await fetch(server.url + '/health')).status, 200, 'the server is up');
});

test('GET /hone/routes lists every route, target, breaker and key by fingerprint', { timeout: 30000 }, async () => {
  const { json } = await routes();
  assert.ok(Array.isArray(json.routes));
  const names = json.routes.map((r) => r.name);
  for (const n of ['failover', 'cloud-only', 'support', 'rl', 'auth', 'flaky-only', 'hone2', 'refused']) assert.ok(names.includes(n), n);
  assert.equal(json.routes.find((r) => r.name === 'failover').policy, 'failover');
  assert.equal(json.routes.find((r) => r.name === 'support').policy, 'local_first');
  assert.equal(json.routes.find((r) => r.name === 'w-cloud').policy, 'weighted');
  assert.deepEqual(json.routes.find((r) => r.name === 'failover').targets.map((t) => t.target), ['cloud:cloud-m', `local:${LOCAL}`]);
  const cloud = routeTarget(json, 'failover', 'cloud:cloud-m');
  assert.ok(['closed', 'open', 'half_open'].includes(cloud.breaker));
  assert.deepEqual(cloud.keys.map((k) => k.fingerprint), KEYS.map(fingerprint));
  for (const k of cloud.keys) {
    assert.match(k.fingerprint, /^key-[0-9a-f]{8}$/);
    assert.ok(['ok', 'cooling', 'revoked'].includes(k.health));
  }
  assert.equal(routeTarget(json, 'refused', 'dead:dead-m').breaker, 'closed');
  assert.equal(typeof json.overflow_rate, 'number');
});

test('/metrics has the route counters and gauges', { timeout: 30000 }, async () => {
  const m = await metricsText();
  for (const name of ['hone_route_requests_total', 'hone_route_retries_total', 'hone_route_overflow_total',
    'hone_route_midstream_recoveries_total', 'hone_route_breaker_state']) {
    assert.ok(m.split('\n').some((l) => l.startsWith(name + '{')), `${name}{...} in /metrics`);
  }
  const req = metricLines(m, 'hone_route_requests_total');
  for (const l of req) for (const label of ['route', 'target', 'outcome']) assert.ok(label in l.labels, `${label} in ${l.line}`);
  assert.ok(req.some((l) => l.labels.route === 'failover' && l.labels.target === 'cloud:cloud-m' && l.value > 0),
    'requests of route failover at cloud:cloud-m are counted');
  assert.ok(req.some((l) => l.labels.route === 'refused' && l.labels.target === `local:${LOCAL}` && l.value > 0),
    'requests of route refused at the local target are counted');
  for (const l of metricLines(m, 'hone_route_breaker_state')) assert.ok([0, 1, 2].includes(l.value), l.line);
});

test('API keys appear nowhere: not in /hone/routes, /metrics or the server log', { timeout: 30000 }, async () => {
  // Make sure keys were used, rejected and rate limited before looking.
  await fresh({ default: { text: 'last' } });
  await chat('failover');
  const { text } = await routes();
  const m = await metricsText();
  const log = server.log();
  assert.ok(log.length > 0);
  for (const k of KEYS) {
    assert.ok(!text.includes(k), `${k} in /hone/routes`);
    assert.ok(!m.includes(k), `${k} in /metrics`);
    assert.ok(!log.includes(k), `${k} in the server log`);
    assert.ok(text.includes(fingerprint(k)), `/hone/routes names ${k} by its fingerprint`);
  }
});
