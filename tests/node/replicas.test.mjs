// hone's router over other hone replicas (kind = "hone"): the affinity policy
// keeps each shared system prompt on one replica and spreads different ones,
// round_robin rotates, the replicas' load shows in /hone/routes, and a replica
// that dies or drains leaves the rotation while every request is answered.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, modelsDir, post, sleep, TMP } from './helpers.mjs';

const N = 3;
let replicas = [], router, configFile;

before(async () => {
  const models = modelsDir();
  for (let i = 0; i < N; ++i)
    replicas.push(await startServer(['--models', models, '--slots', '2', '--threads', '1', '--ctx', '2048',
                                     '--quiet', 'true', '--drain-timeout', '20', '--probe-port', '0', '--pin', 'tiny']));
  const probe = (r) => /probes \([^)]*\) on (http:\/\/[^\s]+)/.exec(r.log())[1];
  const ups = replicas.map((r, i) => `[[upstream]]
name = "r${i + 1}"
base_url = "${r.url}/v1"
kind = "hone"
metrics_url = "${probe(r)}/metrics"
load_interval = "200ms"
health_interval = "1s"
continuation = true
breaker = { consecutive_failures = 2, cooldown = "60s" }
`).join('\n');
  const targets = replicas.map((_, i) => `"r${i + 1}:tiny"`).join(', ');
  configFile = path.join(TMP, `replicas-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, `${ups}
[[route]]
name = "support"
targets = [${targets}]
policy = "affinity"

[[route]]
name = "support-rr"
targets = [${targets}]
policy = "round_robin"
`);
  router = await startServer(['--config', configFile, '--models', models]);
  // The replicas load their pinned model at start; the router's scrapes see it.
  let ready = 0;
  for (let i = 0; i < 100 && ready < N; ++i) {
    const j = await (await fetch(router.url + '/hone/routes')).json();
    ready = Object.values(j.replicas ?? {}).filter((r) => r.reachable && r.models.tiny?.slots === 2).length;
    if (ready < N) await sleep(100);
  }
  assert.equal(ready, N, 'the replicas did not all report their model loaded');
});
after(async () => {
  for (const r of [router, ...replicas]) if (r) await r.stop();
  if (configFile) fs.rmSync(configFile, { force: true });
});

// Tenants: support bots whose system prompts (~5 KB) differ from the start: long
// enough that the prefill a cached prefix saves dwarfs the noise in the
// replicas' measured prefill rates on this tiny model.
const system = (t) => `Tenant ${t}. ` + `You are the support assistant of shop number ${t}; answer briefly and politely. `.repeat(60);
let asked = 0;
async function ask(model, tenant) {
  const id = `q${++asked}`;
  const r = await post(router.url + '/v1/chat/completions', {
    model,
    messages: [{ role: 'system', content: system(tenant) }, { role: 'user', content: `question ${id}: where is my order?` }],
    max_tokens: 4,
    temperature: 0,
  });
  assert.equal(r.status, 200, r.text);
  return r.json.id;
}
// Which replica served each answer, from the router's request log lines.
function targets() {
  const out = [];
  for (const line of router.log().split('\n')) {
    const m = /"route":"route=(\S+) target=(r\d):tiny/.exec(line);
    if (m) out.push({ route: m[1], target: m[2] });
  }
  return out;
}

test('affinity keeps each system prompt on one replica and spreads different ones', async () => {
  const before = targets().length;
  const order = [];
  // Seven tenants in a different order each round: a rotation over three
  // replicas would send a tenant to different ones.
  const rounds = [[0, 1, 2, 3, 4, 5, 6], [4, 0, 5, 2, 6, 1, 3], [6, 5, 3, 1, 0, 2, 4]];
  for (const round of rounds)
    for (const t of round) {
      await ask('support', t);
      order.push(t);
    }
  const got = targets().slice(before).filter((x) => x.route === 'support');
  assert.equal(got.length, order.length, router.log().slice(-2000));
  const where = new Map();
  got.forEach((x, i) => {
    const t = order[i];
    if (!where.has(t)) where.set(t, new Set());
    where.get(t).add(x.target);
  });
  // On a failure: every pick, and the replicas' load as the router sees it now.
  const seen = JSON.stringify((await (await fetch(router.url + '/hone/routes')).json()).replicas);
  for (const [t, set] of where) assert.equal(set.size, 1, `tenant ${t} went to ${[...set]}; order ${JSON.stringify(got.map((x, i) => `${order[i]}:${x.target}`))}; replicas ${seen}`);
  const used = new Set([...where.values()].map((s) => [...s][0]));
  assert.ok(used.size >= 2, `seven tenants all went to ${[...used]}`);
});

test('round_robin rotates over the replicas', async () => {
  const before = targets().length;
  for (let i = 0; i < 6; ++i) await ask('support-rr', 0);
  const got = targets().slice(before).filter((x) => x.route === 'support-rr').map((x) => x.target);
  assert.equal(got.length, 6);
  for (let i = 0; i + N < got.length; ++i) assert.equal(got[i], got[i + N]);
  assert.equal(new Set(got).size, N);
});

test('/hone/routes and /metrics show each replica\'s load', async () => {
  const j = await (await fetch(router.url + '/hone/routes')).json();
  for (let i = 1; i <= N; ++i) {
    const r = j.replicas[`r${i}`];
    assert.equal(r.reachable, true);
    assert.equal(r.models.tiny.slots, 2);
    assert.ok(r.models.tiny.prefill_tokens_per_s > 0);
  }
  const text = await (await fetch(router.url + '/metrics')).text();
  assert.match(text, /^hone_route_replica_reachable\{upstream="r1"\} 1$/m);
});

test('a replica that drains or dies leaves the rotation, and every request is answered', async () => {
  // Which replica tenant 0 lives on.
  const before = targets().length;
  await ask('support', 0);
  const home = targets()[before].target;
  const victim = replicas[Number(home.slice(1)) - 1];
  // A long stream keeps it draining (not gone) for a while after SIGTERM.
  const stream = fetch(victim.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'tell a story' }], max_tokens: 1500,
                           temperature: 0, stream: true }),  // greedy: never stops early
  });
  await sleep(200);
  victim.signal('SIGTERM');
  let seen = null;
  for (let i = 0; i < 30 && !seen; ++i) {
    const j = await (await fetch(router.url + '/hone/routes')).json();
    if (!j.replicas[home].reachable) seen = j.replicas[home];
    else await sleep(100);
  }
  assert.ok(seen, `${home} still reachable while draining`);
  assert.match(seen.error, /draining/);  // read on its probe port, which still answers
  assert.ok(router.log().includes(`replica '${home}' leaves the rotation: it is draining`), router.log().slice(-2000));
  const mark = targets().length;
  for (let i = 0; i < 4; ++i) await ask('support', 0);
  const moved = targets().slice(mark).map((x) => x.target);
  assert.equal(moved.length, 4);
  assert.ok(!moved.includes(home), `sent to the draining ${home}: ${moved}`);
  // Moved tenant 0 sticks to its new replica.
  assert.equal(new Set(moved).size, 1, `tenant 0 moved to ${moved}`);
  await (await stream).text().catch(() => {});
  // Killed outright: the router keeps answering from the others.
  const other = replicas.find((r) => r !== victim);
  other.signal('SIGKILL');
  for (let i = 0; i < 6; ++i) await ask('support', i);
  const text = await (await fetch(router.url + '/metrics')).text();
  assert.match(text, new RegExp(`^hone_route_replica_reachable\\{upstream="${home}"\\} 0$`, 'm'));
});
