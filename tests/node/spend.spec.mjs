// Budgets and the spend ledger end to end (issue 10): real `hone serve`
// processes over the scriptable upstream (fake_upstream.mjs, which logs the
// usage it bills and hone's X-Hone-Request-Id), the official `openai` client,
// a loopback webhook, SQLite in a temp folder and a real PostgreSQL that CTest
// starts (scripts/pg-cluster.sh, fixture "pg"). Run by CTest as
// route_spend_node; it is not part of serve_node_clients because it needs that
// server. Without PostgreSQL the shared-budget test fails and says why.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import OpenAI from 'openai';
import { HONE, modelsDir, startServer, sleep, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const LOCAL = 'stories260K';
const MSGS = [{ role: 'user', content: 'Tell me a story about a cat' }];
const MAX_TOKENS = 16;
// Prices per million tokens: a token in costs 0.001, a token out 0.002.
const PRICES = ['price_input_per_m = 1000', 'price_output_per_m = 2000'];
// hone's worst case for MSGS: one token per prompt byte (+8 per message, +16),
// plus MAX_TOKENS out (route/router.cc PromptTokenBound).
const WORST = ((MSGS[0].content.length + 8 + 16) * 1000 + MAX_TOKENS * 2000) / 1e6;
const FIXTURE_TEXT = 'the cloud answers in plain words';
const fingerprint = (k) => 'key-' + crypto.createHash('sha256').update(k).digest('hex').slice(0, 8);
const costOf = (u) => (u.prompt_tokens * 1000 + u.completion_tokens * 2000) / 1e6;
const close = (a, b) => Math.abs(a - b) < 1e-9;

let up, hook, hookBodies = [], hookFailures = 0, failNextHooks = 0;
const servers = [];
const files = [];

function tomlFile(name, lines) {
  fs.mkdirSync(TMP, { recursive: true });
  const f = path.join(TMP, `spend-${name}-${process.pid}.toml`);
  fs.writeFileSync(f, lines.join('\n') + '\n');
  files.push(f);
  return f;
}

function stateDir(name) {
  const d = path.join(TMP, `spend-state-${name}-${process.pid}`);
  fs.rmSync(d, { recursive: true, force: true });
  return d;
}

async function serve(config, extra = [], env = {}) {
  const s = await startServer(['--config', config, '--models', modelsDir(), '--slots', '2', '--ctx', '512', ...extra], env);
  servers.push(s);
  return s;
}

const chatBody = (model) => ({ model, messages: MSGS, max_tokens: MAX_TOKENS, temperature: 0 });

async function rawChat(url, model, key) {
  const res = await fetch(url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(chatBody(model)),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

const spendOf = async (s, key) =>
  (await fetch(s.url + '/hone/spend', key ? { headers: { Authorization: `Bearer ${key}` } } : {})).json();
const budget = (spend, name) => spend.budgets.find((b) => b.name === name);

function pgUrl() {
  if (process.env.HONE_TEST_PG_URL) return process.env.HONE_TEST_PG_URL;
  const f = path.join(TMP, 'pg.url');
  if (!fs.existsSync(f))
    throw new Error(`no PostgreSQL for this test: CTest's pg_cluster_start (scripts/pg-cluster.sh) did not write ${f}`);
  return fs.readFileSync(f, 'utf8').trim();
}

before(async () => {
  up = await startFakeUpstream();
  hook = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    if (failNextHooks > 0) {  // a webhook that is down for a moment: hone retries with backoff
      --failNextHooks;
      ++hookFailures;
      res.statusCode = 500;
      return res.end('{}');
    }
    hookBodies.push(JSON.parse(body));
    res.end('{}');
  });
  await new Promise((r) => hook.listen(0, '127.0.0.1', r));
});

after(async () => {
  for (const s of servers) await s.stop().catch(() => {});
  if (up) await up.close();
  if (hook) await new Promise((r) => hook.close(r));
  for (const f of files) fs.rmSync(f, { force: true });
});

test('thresholds alert once each (log, metric, webhook), then the spent cap sends the route local', async () => {
  await up.reset();
  hookBodies = [];
  failNextHooks = 1;
  const cap = 0.5;
  const config = tomlFile('thresholds', [
    `state_dir = "${stateDir('thresholds')}"`,
    '[spend]',
    `alert_webhook = "http://127.0.0.1:${hook.address().port}/hook"`,
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"', ...PRICES,
    '[[route]]', 'name = "support"', `targets = ["cloud:cloud-m", "local:${LOCAL}"]`, 'policy = "failover"',
    '[[budget]]', 'name = "cloud-month"', 'scope = "upstream:cloud"', `monthly = ${cap}`,
  ]);
  const s = await serve(config);
  const client = new OpenAI({ baseURL: s.url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 30000 });
  const answers = [];
  for (let i = 0; i < 14; ++i) answers.push((await client.chat.completions.create(chatBody('support'))).choices[0].message.content);

  const log = (await up.log()).filter((e) => e.path.endsWith('/chat/completions'));
  const billed = log.reduce((a, e) => a + costOf(e.usage), 0);
  assert.ok(log.length >= 5 && log.length < 14, `the cloud served ${log.length} of 14`);
  // Every answer after the cap is local, none before.
  answers.forEach((a, i) => assert.equal(a.startsWith('the cloud'), i < log.length, `answer ${i}: ${a}`));
  const spend = await spendOf(s);
  const b = budget(spend, 'cloud-month').monthly;
  assert.ok(close(b.spent, billed), `ledger ${b.spent} vs upstream ${billed}`);
  assert.ok(b.spent <= cap, `spent ${b.spent} over the cap ${cap}`);
  assert.ok(b.spent + WORST > cap, 'a request was refused although its worst case fitted');
  assert.equal(b.reserved, 0);
  const up_row = spend.by_upstream.find((r) => r.key === 'cloud');
  assert.equal(up_row.requests, log.length);
  assert.equal(spend.by_upstream.find((r) => r.key === 'local').requests, 14 - log.length);

  // Which thresholds the spend crossed, each once, then the cap's own alert.
  const share = b.spent / cap;
  const expected = [0.5, 0.8, 0.95].filter((t) => share >= t);
  // The webhook thread posts on its own time; the first POST failed and was retried after 1 s.
  for (let i = 0; i < 40 && hookBodies.length < expected.length + 1; ++i) await sleep(100);
  assert.equal(hookFailures, 1);
  assert.deepEqual(hookBodies.map((h) => h.threshold), [...expected, 1]);
  assert.deepEqual(hookBodies.map((h) => h.type), [...expected.map(() => 'budget_threshold'), 'budget_exhausted']);
  for (const h of hookBodies) assert.equal(h.budget, 'cloud-month');
  const alerts = s.log().split('\n').filter((l) => l.includes('ALERT budget'));
  assert.equal(alerts.length, expected.length + 1, alerts.join('\n'));
  const metrics = await (await fetch(s.url + '/metrics')).text();
  for (const t of expected)
    assert.match(metrics, new RegExp(`hone_budget_alerts_total\\{budget="cloud-month",window="monthly",threshold="${t}"\\} 1`));
  assert.match(metrics, /hone_budget_refusals_total\{budget="cloud-month"\} [1-9]/);
  assert.match(metrics, /hone_budget_spent\{budget="cloud-month",window="monthly"\} /);

  // hone spend reads the same ledger.
  const cli = JSON.parse(execFileSync(HONE, ['spend', '--config', config, '--json']).toString());
  assert.ok(close(budget(cli, 'cloud-month').monthly.spent, billed));
  const csv = execFileSync(HONE, ['spend', '--config', config, '--csv']).toString().trim().split('\n');
  assert.equal(csv.length, 1 + 14);
  // Where there is no ledger, hone spend says so and creates nothing.
  const none = path.join(TMP, `spend-none-${process.pid}`);
  assert.throws(() => execFileSync(HONE, ['spend', '--state-dir', none], { stdio: 'pipe' }),
    (e) => e.status === 1 && /no ledger at .*ledger\.db/.test(e.stderr.toString()));
  assert.equal(fs.existsSync(none), false);
  // After a restart the alerts that fired stay fired.
  await s.stop();
  const again = await serve(config);
  await rawChat(again.url, 'support');
  await sleep(300);
  assert.equal(hookBodies.length, expected.length + 1);
  assert.equal(again.log().split('\n').filter((l) => l.includes('ALERT budget')).length, 0);
});

test('an upstream that reports no usage is billed from hone\'s own counts, and the row says estimated', async () => {
  await up.reset();
  await up.script({ default: { no_usage: true, tokens: 16 } });
  const config = tomlFile('estimated', [
    `state_dir = "${stateDir('estimated')}"`,
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"', ...PRICES,
    '[[route]]', 'name = "est"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"',
  ]);
  const s = await serve(config);
  const client = new OpenAI({ baseURL: s.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  const stream = await client.chat.completions.create({ ...chatBody('est'), stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  assert.ok(text.startsWith('the cloud'));
  const csv = execFileSync(HONE, ['spend', '--config', config, '--csv']).toString().trim().split('\n');
  assert.equal(csv.length, 2);
  const f = csv[1].split(',');
  assert.equal(f[11], '1', 'marked estimated');
  assert.equal(Number(f[9]), 16, 'one token per streamed chunk');
  assert.ok(Number(f[7]) > 0, 'the prompt was counted');
  assert.ok(Number(f[10]) > 0, 'and priced');
  const spend = await spendOf(s);
  assert.equal(spend.total.estimated, 1);
  await up.reset();
});

test('on_budget_exceeded = "refuse": 429 naming the tenant\'s budget, other tenants served', async () => {
  await up.reset();
  const keys = ['tenant-a-key', 'tenant-b-key'];
  const config = tomlFile('refuse', [
    `state_dir = "${stateDir('refuse')}"`,
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"', ...PRICES,
    '[[route]]', 'name = "strict"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"', 'on_budget_exceeded = "refuse"',
    '[[budget]]', 'name = "tenant-a"', `scope = "tenant:${fingerprint(keys[0])}"`, `monthly = ${WORST / 2}`,
  ]);
  const s = await serve(config, [], { HONE_API_KEYS: keys.join(',') });
  const a = await rawChat(s.url, 'strict', keys[0]);
  assert.equal(a.status, 429, JSON.stringify(a.body));
  assert.match(a.body.error.message, /budget 'tenant-a' is spent for the month/);
  assert.ok(Number(a.retryAfter) > 0, 'Retry-After until the month ends');
  const client = new OpenAI({ baseURL: s.url + '/v1', apiKey: keys[0], maxRetries: 0 });
  await assert.rejects(client.chat.completions.create(chatBody('strict')), (e) => e.status === 429);
  const b = await rawChat(s.url, 'strict', keys[1]);
  assert.equal(b.status, 200);
  assert.ok(b.body.choices[0].message.content.startsWith('the cloud'));
  assert.equal((await up.log()).filter((e) => e.path.endsWith('/chat/completions')).length, 1, 'tenant a never reached the cloud');
  const spend = await spendOf(s, keys[1]);
  assert.equal(spend.by_tenant.find((r) => r.key === fingerprint(keys[1])).requests, 1);
  assert.equal(spend.by_tenant.find((r) => r.key === fingerprint(keys[0])), undefined);
});

// 64 requests at once against a cap that fits 10 worst cases. The upstream
// holds each answer for 4 s, so every admission is decided while the first
// ten still hold their reservations.
async function burst(urls, model, n) {
  return Promise.all(Array.from({ length: n }, (_, i) => rawChat(urls[i % urls.length], model)));
}

function capConfig(name, ledger) {
  return tomlFile(name, [
    `state_dir = "${stateDir(name)}"`,
    ...ledger,
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"', 'max_concurrent = 128', ...PRICES,
    '[[route]]', 'name = "capped"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"', 'on_budget_exceeded = "refuse"',
    '[[budget]]', `name = "ten-${name}-${process.pid}"`, 'scope = "global"', `monthly = ${(10 * WORST).toFixed(6)}`,
  ]);
}

async function checkBurst(results, servers_, name) {
  const ok = results.filter((r) => r.status === 200).length;
  const refused = results.filter((r) => r.status === 429);
  assert.equal(ok, 10, `admitted ${ok}: ${JSON.stringify(results.filter((r) => r.status !== 200 && r.status !== 429))}`);
  assert.equal(refused.length, 54);
  for (const r of refused) assert.match(r.body.error.message, /budget 'ten-/);
  assert.equal((await up.log()).filter((e) => e.path.endsWith('/chat/completions')).length, 10, 'the upstream saw only the admitted');
  for (const s of servers_) {
    const b = budget(await spendOf(s), `ten-${name}-${process.pid}`).monthly;
    assert.ok(b.spent <= 10 * WORST + 1e-9, `spent ${b.spent} over the cap`);
    assert.equal(b.reserved, 0);
  }
}

test('64 concurrent requests against a cap that fits 10: 10 admitted (SQLite, one process)', async () => {
  await up.reset();
  await up.script({ default: { ttft_ms: 4000 } });
  const s = await serve(capConfig('sqlite', []));
  await checkBurst(await burst([s.url], 'capped', 64), [s], 'sqlite');
  await up.reset();
});

test('two hone serve processes share one budget through PostgreSQL: 10 of 64 admitted', async () => {
  const url = pgUrl();  // throws (fails) with the reason when the fixture did not start PostgreSQL
  await up.reset();
  await up.script({ default: { ttft_ms: 4000 } });
  const config = capConfig('pg', ['[spend]', 'ledger = "postgres"', 'postgres_url_env = "HONE_PG_URL"']);
  const s1 = await serve(config, [], { HONE_PG_URL: url });
  const s2 = await serve(config, [], { HONE_PG_URL: url });
  await checkBurst(await burst([s1.url, s2.url], 'capped', 64), [s1, s2], 'pg');
  const a = await spendOf(s1), b = await spendOf(s2);
  assert.equal(a.ledger, 'postgres');
  assert.deepEqual(budget(a, `ten-pg-${process.pid}`), budget(b, `ten-pg-${process.pid}`), 'both replicas read one budget');
  await up.reset();
});

test('SIGKILL in the middle of 200 requests loses no settled row: the ledger reconciles with the upstream, request by request', async () => {
  await up.reset();
  await up.script({ default: { ttft_ms: 5, tokens_per_s: 2000, tokens: 16 } });
  const config = tomlFile('kill', [
    `state_dir = "${stateDir('kill')}"`,
    '[spend]', 'reservation_ttl = "2s"',
    '[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"', ...PRICES,
    '[[route]]', 'name = "support"', 'targets = ["cloud:cloud-m"]', 'policy = "failover"',
    '[[budget]]', 'name = "big"', 'scope = "global"', 'monthly = 1000',
  ]);
  const s = await serve(config);
  let completeAtClient = 0, sent = 0, killed = false;
  const worker = async () => {
    while (sent < 200 && !killed) {
      ++sent;
      try {
        const r = await rawChat(s.url, 'support');
        if (r.status === 200 && r.body.choices?.[0]?.finish_reason) ++completeAtClient;
      } catch {
        // the server died under this request
      }
    }
  };
  const killer = (async () => {
    for (;;) {
      const n = (await up.log()).length;
      if (n >= 100) break;
      await sleep(5);
    }
    killed = true;
    s.signal('SIGKILL');
  })();
  await Promise.all([killer, ...Array.from({ length: 8 }, worker)]);
  assert.equal(await s.exited, 'SIGKILL');

  const log = (await up.log()).filter((e) => e.path.endsWith('/chat/completions'));
  const spend = JSON.parse(execFileSync(HONE, ['spend', '--config', config, '--json']).toString());
  const csv = execFileSync(HONE, ['spend', '--config', config, '--csv']).toString().trim().split('\n').slice(1);
  const rows = new Map(csv.map((l) => l.split(',')).map((f) => [f[0], { prompt: Number(f[7]), completion: Number(f[9]), cost: Number(f[10]) }]));
  const held = new Set(spend.reservations.map((r) => r.id));
  assert.ok(log.length >= 100, `the upstream saw ${log.length}`);
  assert.ok(completeAtClient >= 50, `only ${completeAtClient} answers completed before the kill`);
  assert.ok(rows.size >= completeAtClient, `${completeAtClient} answers reached clients but the ledger has ${rows.size} rows`);
  let settled = 0, heldCount = 0;
  for (const e of log) {
    assert.ok(e.hone_id, 'every upstream request carries its ledger id');
    const row = rows.get(e.hone_id);
    if (row) {
      ++settled;
      assert.equal(row.prompt, e.usage.prompt_tokens, `row ${e.hone_id}`);
      assert.equal(row.completion, e.usage.completion_tokens, `row ${e.hone_id}`);
      assert.ok(close(row.cost, costOf(e.usage)));
    } else {
      // In flight at the kill: no row, and its hold ended with the process
      // (a SQLite ledger's owner keeps its holds in memory).
      ++heldCount;
    }
  }
  assert.equal(held.size, 0, 'a dead server leaves no hold in the file');
  assert.equal(settled, rows.size, 'every ledger row is a request the upstream served');
  const total = [...rows.values()].reduce((a, r) => a + r.cost, 0);
  assert.ok(close(budget(spend, 'big').monthly.spent, total));
  assert.ok(heldCount <= 8, `${heldCount} unsettled: at most one per client`);

  // The lock on the ledger died with the process: a new server takes it over,
  // and the spend is what was settled.
  const again = await serve(config);
  const deadline = Date.now() + 10000;
  let after_;
  do {
    await sleep(300);
    after_ = await spendOf(again);
  } while (after_.reservations.length && Date.now() < deadline);
  assert.equal(after_.reservations.length, 0, 'nothing held');
  assert.equal(budget(after_, 'big').monthly.reserved, 0);
  assert.ok(close(budget(after_, 'big').monthly.spent, total), 'the restart changes no settled spend');
  // A second server on the same ledger file is refused, with the way out.
  await assert.rejects(serve(config), /in use by another hone serve.*--state-dir.*PostgreSQL/s);
  await up.reset();
});
