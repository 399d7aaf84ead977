// Admin scope: with --admin-keys, only those keys reach hone's admin
// endpoints (load, unload, spend, canary commands); a client's API key gets
// 403 there and still serves inference. Through real HTTP on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { modelsDir, startServer, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

let up, server, configFile;
const USER = 'user-key-1', ADMIN = 'admin-key-1';

before(async () => {
  up = await startFakeUpstream();
  fs.mkdirSync(TMP, { recursive: true });
  configFile = path.join(TMP, `admin-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, ['[[upstream]]', 'name = "cloud"', `base_url = "${up.url}/v1"`, 'health_interval = "1h"',
    '[[route]]', 'name = "r"', 'targets = ["cloud:m"]', 'policy = "failover"',
    'canary = { target = "cloud:m2", hold = "1h" }'].join('\n') + '\n');
  server = await startServer(['--config', configFile, '--models', modelsDir()],
                             { HONE_API_KEYS: USER, HONE_ADMIN_KEYS: ADMIN });
});

after(async () => {
  if (server) await server.stop();
  if (up) await up.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

const call = (method, p, key, body) => fetch(server.url + p, {
  method,
  headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
  ...(body ? { body: JSON.stringify(body) } : {}),
});

test('a client key gets 403 on admin endpoints, an admin key passes, no key 401', async () => {
  for (const [method, p, body] of [['GET', '/hone/spend'], ['POST', '/hone/routes/canary', { route: 'r', action: 'status' }],
    ['POST', '/hone/load', { model: 'stories260K' }], ['POST', '/hone/unload', { model: 'stories260K' }]]) {
    const user = await call(method, p, USER, body);
    assert.equal(user.status, 403, `${p} with a client key`);
    assert.match((await user.json()).error.message, /needs an admin key/);
    assert.equal((await call(method, p, undefined, body)).status, 401, `${p} without a key`);
    const admin = await call(method, p, ADMIN, body);
    assert.equal(admin.status, 200, `${p} with the admin key: ${await admin.text()}`);
  }
});

test('the client key still serves inference and the route list', async () => {
  const r = await call('POST', '/v1/chat/completions', USER, { model: 'r', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 200);
  assert.equal((await call('GET', '/hone/routes', USER)).status, 200);
  assert.equal((await call('GET', '/v1/models', 'wrong-key')).status, 401);
});

test('keep_alive that pins or unloads needs the admin key; a duration does not', async () => {
  const gen = (key, keep_alive) => call('POST', '/api/generate', key,
    { model: 'stories260K', prompt: 'Once', stream: false, options: { num_predict: 2 }, keep_alive });
  for (const ka of [0, -1, '-1m']) {
    const r = await gen(USER, ka);
    assert.equal(r.status, 403, `keep_alive ${ka} with a client key`);
    assert.match((await r.json()).error, /keep_alive .* needs an admin key/);
  }
  assert.equal((await gen(USER, '10m')).status, 200);
  assert.equal((await gen(USER, undefined)).status, 200);
  // For an admin it works.
  assert.equal((await gen(ADMIN, -1)).status, 200);
  assert.equal((await gen(ADMIN, 0)).status, 200);
});
