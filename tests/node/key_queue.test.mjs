// A 429 storm (issue 27, item 2) through `hone serve --config`: one upstream
// with two keys that answers 429 (Retry-After: 1) to half of all chat
// requests at random, one route with max_attempts = 4 and a 30 s deadline,
// 20 concurrent clients. Every request is answered, and after each cooldown
// the upstream sees that key's requests one at a time: the first after the
// cooldown goes alone, and the next only after the upstream answered it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { modelsDir, startServer, post, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const KEYS = ['sk-storm-a', 'sk-storm-b'];
const CLIENTS = 20;
// A request hone sent before it read a 429 may still reach the upstream a
// little after that 429 went out; anything later than this was sent after.
const IN_FLIGHT_SLACK_MS = 300;

let up, server, configFile;

before(async () => {
  up = await startFakeUpstream();
  fs.mkdirSync(TMP, { recursive: true });
  configFile = path.join(TMP, `key-queue-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, [
    '[[upstream]]',
    'name = "storm"',
    `base_url = "${up.url}/v1"`,
    `api_keys = ${JSON.stringify(KEYS)}`,
    'health_interval = "1h"',
    // 429s are the keys' business, not the upstream's failure: no breaker here.
    'breaker = { consecutive_failures = 1000, failure_rate = 1.0, min_volume = 100000 }',
    '',
    '[[route]]',
    'name = "storm"',
    'targets = ["storm:m"]',
    'policy = "failover"',
    'retry = { max_attempts = 4, deadline = "30s" }',
    '',
    // The same upstream under other keys (a queue of its own), for a route
    // whose deadline passes while its requests wait.
    '[[upstream]]',
    'name = "hail"',
    `base_url = "${up.url}/v1"`,
    'api_keys = ["sk-hail-a", "sk-hail-b"]',
    'health_interval = "1h"',
    'breaker = { consecutive_failures = 1000, failure_rate = 1.0, min_volume = 100000 }',
    '',
    '[[route]]',
    'name = "hail"',
    'targets = ["hail:m"]',
    'policy = "failover"',
    'retry = { max_attempts = 4, deadline = "2500ms" }',
    '',
  ].join('\n'));
  server = await startServer(['--config', configFile, '--models', modelsDir()]);
});

after(async () => {
  if (server) await server.stop();
  if (up) await up.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

const chat = (i, model = 'storm') => post(server.url + '/v1/chat/completions', {
  model, max_tokens: 4, messages: [{ role: 'user', content: `storm request ${i}` }],
});

test('a 429 storm over two keys: every request is answered, one release per key after each cooldown', { timeout: 60000 }, async () => {
  // Seed 3: the 20th accepted attempt is the 40th, so the upstream answers
  // exactly half of the attempts the storm needs (the condition).
  await up.script({ default: { limit_share: 0.5, retry_after: 1, seed: 3, ttft_ms: 20, tokens: 4, text: 'calm after the storm' } });
  const t0 = Date.now();
  const answers = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => chat(i)));
  const wall = Date.now() - t0;
  const statuses = answers.map((a) => a.status);
  assert.deepEqual(statuses, Array(CLIENTS).fill(200),
    `all ${CLIENTS} answered (${wall} ms): ${JSON.stringify(answers.filter((a) => a.status !== 200).map((a) => a.text))}`);
  assert.ok(answers.every((a) => a.json?.choices?.[0]?.message?.content), 'each answer has its text');

  const log = (await up.log()).filter((e) => e.path.endsWith('/chat/completions'));
  const limited = log.filter((e) => e.status === 429);
  assert.ok(limited.length >= 4, `the storm happened: ${limited.length} of ${log.length} attempts got 429`);
  assert.equal(log.filter((e) => e.status === 200).length, CLIENTS, 'one accepted attempt per request');

  let probes = 0;
  for (const key of KEYS) {
    const mine = log.filter((e) => e.key === key).sort((a, b) => a.time - b.time);
    const trace = JSON.stringify(mine.map((e) => [e.time - t0, e.answered - t0, e.status]));
    for (const l of mine.filter((e) => e.status === 429)) {
      // Nothing is sent to a cooling key...
      const during = mine.filter((e) => e.time > l.answered + IN_FLIGHT_SLACK_MS && e.time < l.answered + 1000 - 2);
      assert.deepEqual(during, [], `${key} got requests during the cooldown from ${l.answered - t0} ms: ${trace}`);
      // ...and the first request after it goes alone until the upstream answered it.
      const probe = mine.find((e) => e.time > l.answered + IN_FLIGHT_SLACK_MS);
      if (!probe) continue;  // no request needed this key again
      ++probes;
      const burst = mine.filter((e) => e !== probe && e.time >= probe.time && e.time < probe.answered);
      assert.deepEqual(burst, [],
        `${key}: after the cooldown from ${l.answered - t0} ms, ${burst.length + 1} requests went before the first was answered: ${trace}`);
    }
  }
  assert.ok(probes >= 2, `cooldowns were followed by releases (${probes} seen)`);
});

test('an upstream that refuses everything: requests wait to the deadline, then 429 with a Retry-After', { timeout: 60000 }, async () => {
  await up.script({ default: { limit_share: 1, retry_after: 1, ttft_ms: 20 } });
  const t0 = Date.now();
  const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => chat(i, 'hail')));
  const wall = Date.now() - t0;
  for (const a of answers) {
    assert.equal(a.status, 429, a.text);
    assert.match(a.text, /cooling down/);
    const retryAfter = Number(a.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After: ${a.headers.get('retry-after')}`);
  }
  // They kept their places until the 2.5 s deadline (four 429s no longer end a request).
  assert.ok(wall >= 2000, `answered after ${wall} ms`);
  const log = (await up.log()).filter((e) => e.key.startsWith('sk-hail'));
  // One probe per key per cooldown (about 2.5 cooldowns, 2 keys), plus the first burst.
  assert.ok(log.length <= 5 + 2 * 4, `${log.length} attempts reached the upstream`);
});
