// The response cache for hot requests (issue 10), through the official
// `openai` client: one `hone serve` with a [cache] table over the scriptable
// upstream (fake_upstream.mjs). Hits replay as streams of the same chunks with
// usage, are kept per tenant (client key), and never hold errors, broken
// streams or answers cut by max_tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { modelsDir, startServer, sleep, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const KEYS = ['cache-tenant-a', 'cache-tenant-b'];
let up, server, configFile;
const client = (key = KEYS[0]) => new OpenAI({ baseURL: server.url + '/v1', apiKey: key, maxRetries: 0, timeout: 20000 });
const upstreamCalls = async () => (await up.log()).filter((e) => e.path.endsWith('/chat/completions')).length;
let n = 0;
const question = () => [{ role: 'user', content: `How do I reset my password? (#${++n})` }];

before(async () => {
  up = await startFakeUpstream();
  fs.mkdirSync(TMP, { recursive: true });
  configFile = path.join(TMP, `cache-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, [
    '[cache]', 'max_bytes = "1M"', 'ttl = "2s"',
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"',
    'price_input_per_m = 1', 'price_output_per_m = 2',
    '[[route]]', 'name = "faq"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"',
    'retry = { max_attempts = 1, deadline = "10s" }',
    '[[route]]', 'name = "faq-all"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"', 'cache = "all"',
    '[[route]]', 'name = "faq-off"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"', 'cache = "off"',
  ].join('\n') + '\n');
  server = await startServer(['--config', configFile, '--models', modelsDir()], { HONE_API_KEYS: KEYS.join(',') });
});

after(async () => {
  if (server) await server.stop();
  if (up) await up.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

async function streamed(messages, extra = {}, key) {
  const { data, response } = await client(key).chat.completions
    .create({ model: 'faq', messages, temperature: 0, max_tokens: 64, stream: true, stream_options: { include_usage: true }, ...extra })
    .withResponse();
  const chunks = [];
  let usage = null, finish = null;
  for await (const c of data) {
    if (c.usage) usage = c.usage;
    const d = c.choices?.[0];
    if (d?.delta?.content) chunks.push(d.delta.content);
    if (d?.finish_reason) finish = d.finish_reason;
  }
  return { cache: response.headers.get('x-hone-cache'), chunks, usage, finish };
}

async function plain(messages, extra = {}, key, headers = {}) {
  const { data, response } = await client(key).chat.completions
    .create({ model: 'faq', messages, temperature: 0, max_tokens: 64, ...extra }, { headers })
    .withResponse();
  return { cache: response.headers.get('x-hone-cache'), text: data.choices[0].message.content, usage: data.usage, finish: data.choices[0].finish_reason };
}

test('a streamed hit replays the same chunks, with usage, and never reaches the upstream', async () => {
  await up.reset();
  const q = question();
  const first = await streamed(q);
  assert.equal(first.cache, 'miss');
  assert.ok(first.chunks.length > 3, 'the upstream streams several chunks');
  const second = await streamed(q);
  assert.equal(second.cache, 'hit');
  assert.deepEqual(second.chunks, first.chunks, 'the same pieces, not one blob');
  assert.equal(second.finish, 'stop');
  assert.deepEqual(second.usage, first.usage);
  const third = await plain(q);
  assert.equal(third.cache, 'hit', 'a stream\'s answer serves a non-streamed request too');
  assert.equal(third.text, first.chunks.join(''));
  assert.equal(await upstreamCalls(), 1);
  const routes = await (await fetch(server.url + '/hone/routes', { headers: { Authorization: `Bearer ${KEYS[0]}` } })).json();
  const faq = routes.routes.find((r) => r.name === 'faq');
  assert.equal(faq.cache.hits, 2);
  assert.equal(faq.cache.misses, 1);
  assert.ok(Math.abs(faq.cache.hit_rate - 2 / 3) < 1e-9);
  assert.ok(routes.cache.bytes > 0 && routes.cache.entries >= 1);
  const metrics = await (await fetch(server.url + '/metrics', { headers: { Authorization: `Bearer ${KEYS[0]}` } })).text();
  assert.match(metrics, /hone_cache_requests_total\{route="faq",result="hit"\} 2/);
  assert.match(metrics, /hone_cache_bytes [1-9]/);
  // A hit costs nothing: the ledger has one row.
  const spend = await (await fetch(server.url + '/hone/spend', { headers: { Authorization: `Bearer ${KEYS[0]}` } })).json();
  assert.equal(spend.by_route.find((r) => r.key === 'faq').requests, 1);
});

test('answers are kept per tenant: one client key never gets another\'s', async () => {
  await up.reset();
  const q = question();
  assert.equal((await plain(q, {}, KEYS[0])).cache, 'miss');
  assert.equal((await plain(q, {}, KEYS[1])).cache, 'miss');
  assert.equal((await plain(q, {}, KEYS[0])).cache, 'hit');
  assert.equal((await plain(q, {}, KEYS[1])).cache, 'hit');
  assert.equal(await upstreamCalls(), 2);
});

test('errors, broken streams and answers cut by max_tokens are never cached', async () => {
  await up.reset();
  const q = question();
  await up.script({ queue: [{ status: 500 }] });
  await assert.rejects(plain(q), (e) => e.status === 502);
  assert.equal((await plain(q)).cache, 'miss', 'the error was not stored');
  assert.equal((await plain(q)).cache, 'hit');

  const broken = question();
  await up.script({ queue: [{ drop_after: 3 }] });
  const cut = await streamed(broken).catch((e) => ({ error: e }));
  assert.ok(cut.error || cut.finish !== 'stop', 'the broken stream did not end as complete');
  assert.equal((await plain(broken)).cache, 'miss', 'the broken stream was not stored');

  const short = question();
  const r = await plain(short, { max_tokens: 3 });
  assert.equal(r.finish, 'length');
  assert.equal((await plain(short, { max_tokens: 3 })).cache, 'miss', 'a length cut is not stored');
});

test('only deterministic requests by default; cache = "all" and "off"; a bypass header; the TTL', async () => {
  await up.reset();
  const q = question();
  const hot = await plain(q, { temperature: 0.8 });
  assert.equal(hot.cache, null, 'a sampled request does not ask the cache');
  assert.equal((await plain(q, { temperature: 0.8, seed: 7 })).cache, 'miss', 'a fixed seed is deterministic');
  assert.equal((await plain(q, { temperature: 0.8, seed: 7 })).cache, 'hit');
  assert.equal((await plain(q, { model: 'faq-all', temperature: 0.8 })).cache, 'miss');
  assert.equal((await plain(q, { model: 'faq-all', temperature: 0.8 })).cache, 'hit');
  assert.equal((await plain(q, { model: 'faq-off' })).cache, null);
  const calls = await upstreamCalls();
  const bypass = await plain(q, { seed: 7, temperature: 0.8 }, KEYS[0], { 'Cache-Control': 'no-cache' });
  assert.equal(bypass.cache, null);
  assert.equal(await upstreamCalls(), calls + 1, 'the bypass went to the upstream');
  await sleep(2300);
  assert.equal((await plain(q, { temperature: 0.8, seed: 7 })).cache, 'miss', 'past the TTL');
});
