// Gray releases that ramp themselves (issue 10), through the official `openai`
// client: one `hone serve` whose routes carry a canary, over three scriptable
// upstreams (fake_upstream.mjs): the baseline, a slow candidate and a healthy
// one. Holds are 1 s so the whole ramp fits in a test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { HONE, modelsDir, startServer, sleep, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const run = promisify(execFile);
let base, slow, good, server, configFile, stateDir;
const fixtures = () => ({ base, slow, good });

function config() {
  const upstream = (name, u) => ['[[upstream]]', `name = "${name}"`, `base_url = "${u.url}/v1"`, 'health_interval = "1h"'];
  const route = (name, canary) => ['[[route]]', `name = "${name}"`, 'targets = ["base:m"]', 'policy = "failover"',
    'retry = { max_attempts = 1, deadline = "10s" }', `canary = { ${canary} }`];
  return [
    `state_dir = "${stateDir}"`,
    ...upstream('base', base), ...upstream('slow', slow), ...upstream('good', good),
    ...route('r-slow', 'target = "slow:m", steps = [20, 50, 100], hold = "1s", min_requests = 8, max_p99_ratio = 1.5, max_error_rate = 0.2'),
    ...route('r-good', 'target = "good:m", steps = [20, 50, 100], hold = "1s", min_requests = 6, max_p99_ratio = 6.0, max_error_rate = 0.2'),
    ...route('r-shadow', 'target = "good:m", steps = [40, 100], hold = "1s", min_requests = 5, max_p99_ratio = 6.0, shadow = true'),
  ].join('\n') + '\n';
}

async function start() {
  if (server) await server.stop();
  server = await startServer(['--config', configFile, '--models', modelsDir()]);
  return new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 20000 });
}

before(async () => {
  base = await startFakeUpstream();
  slow = await startFakeUpstream();
  good = await startFakeUpstream();
  await base.script({ default: { text: 'base answers', ttft_ms: 10, tokens: 4 } });
  await slow.script({ default: { text: 'slow answers', ttft_ms: 400, tokens: 4 } });
  await good.script({ default: { text: 'good answers', ttft_ms: 10, tokens: 4 } });
  fs.mkdirSync(TMP, { recursive: true });
  stateDir = path.join(TMP, `canary-state-${process.pid}`);
  fs.rmSync(stateDir, { recursive: true, force: true });
  configFile = path.join(TMP, `canary-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, config());
});

after(async () => {
  if (server) await server.stop();
  for (const u of [base, slow, good]) if (u) await u.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

const canaryOf = async (route) => (await (await fetch(server.url + '/hone/routes')).json()).routes.find((r) => r.name === route).canary;

// Conversations of `users` users, `turns` requests each, 4 at a time, until
// `done` says so or the time runs out. Returns which fixture answered each
// user; `answers` gets every answer with the time it arrived.
async function drive(client, route, { users = 400, done, ms = 30000, answers = [] }) {
  const servedBy = new Map();
  const until = Date.now() + ms;
  let next = 0;
  const one = async () => {
    while (Date.now() < until && !(await done())) {
      const u = `user-${route}-${next++ % users}`;
      const r = await client.chat.completions.create({ model: route, user: u, max_tokens: 4, temperature: 0,
        messages: [{ role: 'user', content: `Hello from ${u}` }] });
      const who = r.choices[0].message.content.split(' ')[0];
      answers.push({ who, at: Date.now() });
      if (!servedBy.has(u)) servedBy.set(u, new Set());
      servedBy.get(u).add(who);
    }
  };
  await Promise.all([one(), one(), one(), one()]);
  return servedBy;
}

test('a healthy candidate ramps 20% -> 50% -> 100% by itself, and each user stays on one arm', async () => {
  const client = await start();
  const seen = new Set();
  const servedBy = await drive(client, 'r-good', {
    users: 60,
    done: async () => {
      const c = await canaryOf('r-good');
      seen.add(`${c.state}@${c.percent}`);
      return c.state === 'promoted';
    },
  });
  const c = await canaryOf('r-good');
  assert.equal(c.state, 'promoted', JSON.stringify(c));
  assert.ok(seen.has('ramping@20') && seen.has('ramping@50'), [...seen].join(' '));
  for (const [u, arms] of servedBy) assert.equal(arms.size, 1, `${u} was served by ${[...arms]}`);
  const arms = new Set([...servedBy.values()].map((s) => [...s][0]));
  assert.deepEqual([...arms].sort(), ['base', 'good'], 'both arms served users');
  const metrics = await (await fetch(server.url + '/metrics')).text();
  assert.match(metrics, /hone_canary_decisions_total\{route="r-good",decision="advance"\} 1/);
  assert.match(metrics, /hone_canary_decisions_total\{route="r-good",decision="promote"\} 1/);
  assert.match(metrics, /hone_canary_percent\{route="r-good"\} 100/);
  assert.match(server.log(), /canary r-good: promote -> promoted at 100%/);
  // New conversations all go to the candidate now.
  const r = await client.chat.completions.create({ model: 'r-good', user: 'someone-new', max_tokens: 4,
    messages: [{ role: 'user', content: 'Hi' }] });
  assert.ok(r.choices[0].message.content.startsWith('good'));
});

test('a candidate 40x slower at P99 rolls back by itself, and then no user reaches it', async () => {
  const client = await start();
  await drive(client, 'r-slow', { done: async () => (await canaryOf('r-slow')).state === 'rolled_back', ms: 40000 });
  const c = await canaryOf('r-slow');
  assert.equal(c.state, 'rolled_back', JSON.stringify(c));
  assert.match(c.reason, /P99/);
  const before_ = (await slow.log()).length;
  for (let i = 0; i < 10; ++i) {
    const r = await client.chat.completions.create({ model: 'r-slow', user: `after-${i}`, max_tokens: 4,
      messages: [{ role: 'user', content: 'Hi' }] });
    assert.ok(r.choices[0].message.content.startsWith('base'));
  }
  assert.equal((await slow.log()).length, before_, 'nothing went to the rolled-back candidate');
  assert.match(server.log(), /canary r-slow: rollback -> rolled_back/);
});

test('shadow mode mirrors to the candidate, answers from the baseline, then goes live', async () => {
  const client = await start();
  const goodBefore = (await good.log()).length;
  const answers = [];
  await drive(client, 'r-shadow', {
    users: 200,
    answers,
    done: async () => (await canaryOf('r-shadow')).state !== 'shadow',
  });
  const c = await canaryOf('r-shadow');
  assert.equal(c.state, 'ramping');
  // The moment it went live; a request already on its way then may meet the
  // live candidate, none before.
  const live = Date.now() - c.step_age_s * 1000;
  const early = answers.filter((a) => a.who !== 'base' && a.at < live - 20);
  assert.deepEqual(early, [], 'no user saw a candidate answer while it was a shadow');
  assert.ok(answers.filter((a) => a.at < live).length >= 5, 'the shadow phase served users');
  assert.ok((await good.log()).length > goodBefore, 'the candidate got copies');
});

test('the state survives a restart; hone route canary shows, promotes and rolls back', async () => {
  await start();
  assert.equal((await canaryOf('r-good')).state, 'promoted');
  assert.equal((await canaryOf('r-slow')).state, 'rolled_back');
  const status = await run(HONE, ['route', 'canary', 'status', 'r-slow', '--url', server.url]);
  assert.match(status.stdout, /canary slow:m is rolled_back at 0%/);
  const promoted = JSON.parse((await run(HONE, ['route', 'canary', 'promote', 'r-slow', '--url', server.url, '--json'])).stdout);
  assert.equal(promoted.state, 'promoted');
  assert.equal(promoted.reason, 'promoted by an operator');
  await run(HONE, ['route', 'canary', 'rollback', 'r-slow', '--url', server.url]);
  assert.equal((await canaryOf('r-slow')).state, 'rolled_back');
  await assert.rejects(run(HONE, ['route', 'canary', 'status', 'nope', '--url', server.url]), /no route 'nope'/);
});
