// The prompt cache beyond the slots (issue 26), through the official `openai`
// client: with one slot, a conversation whose slot went to another comes back
// and restores its history from RAM, after a restart from disk, with the same
// greedy answer as a server without the cache (the Ollama API says how much
// was cached too); a tenant never restores
// another's; /hone/cache lists and clears; the metrics count each tier; a
// route's shared system prompt is warmed at start and reused by every tenant.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { spawnSync } from 'node:child_process';
import { modelsDir, startServer, metric, TMP, HONE } from './helpers.mjs';

const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
});
async function serve(args, env = {}) {
  const s = await startServer(['--models', modelsDir(), '--slots', '1', '--ctx', '1024', ...args], env);
  servers.push(s);
  return s;
}
const clientOf = (s, key = 'unused') => new OpenAI({ baseURL: s.url + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });

const SYSTEM = 'You are the support assistant of Northwind Home Internet. Be polite, precise and brief. ' +
  'Our plans: Basic 100 Mbit/s at 29 euros a month, Plus 500 Mbit/s at 39 euros, Max 1 Gbit/s at 49 euros. ' +
  'Every plan includes a Wi-Fi 6 router, free installation, and no data cap. Contracts run month to month.';
const ask = (client, messages, extra = {}) =>
  client.chat.completions.create({ model: 'tiny', messages, max_tokens: 8, temperature: 0, ...extra });

// Turn one of a conversation, then another conversation takes the only slot.
async function firstTurnThenEvict(client, who, extra = {}) {
  const history = [{ role: 'system', content: SYSTEM }, { role: 'user', content: `${who}: my router light is red.` }];
  const first = await ask(client, history, extra);
  await ask(client, [{ role: 'user', content: `Someone else entirely asks about invoices, ${who}.` }], extra);
  history.push({ role: 'assistant', content: first.choices[0].message.content });
  history.push({ role: 'user', content: 'It is still red after a restart. What now?' });
  // The answer is tokenized again inside the history, and its first token may
  // merge with the template's newline before it: a few tokens of slack.
  return { history, firstPrompt: first.usage.prompt_tokens - 4 };
}

test('a returning conversation restores its history from RAM, then from disk after a restart, answering as a fresh server', async () => {
  const fresh = await serve(['--cache-ram', '0', '--cache-disk', '0']);
  const { history } = await firstTurnThenEvict(clientOf(fresh), 'Ann');
  const expected = await ask(clientOf(fresh), history);
  await fresh.stop();

  const dir = path.join(TMP, `prompt-cache-node-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  const flags = ['--cache-ram', '64M', '--cache-disk', '64M', '--cache-dir', dir];
  const hot = await serve(flags);
  const { firstPrompt } = await firstTurnThenEvict(clientOf(hot), 'Ann');
  const again = await ask(clientOf(hot), history);
  assert.equal(again.choices[0].message.content, expected.choices[0].message.content);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= firstPrompt,
    `cached ${again.usage.prompt_tokens_details.cached_tokens} of ${again.usage.prompt_tokens}; the first turn had ${firstPrompt}`);
  assert.equal(await metric(hot.url, 'hone_prompt_cache_ram_hits_total', 'tiny'), 1);
  assert.ok((await metric(hot.url, 'hone_prompt_cache_ram_bytes', 'tiny')) > 0);

  // Admin views: entries by tenant with sizes; DELETE clears them.
  const listed = await (await fetch(hot.url + '/hone/cache')).json();
  const tiny = listed.data.find((m) => m.model === 'tiny');
  assert.ok(tiny.entries.length >= 1 && tiny.entries.every((e) => e.bytes > 0 && e.tokens >= 32));
  assert.ok(!JSON.stringify(listed).includes('router'), 'no prompt text in the listing');
  await hot.stop();  // the slot's history is written to disk on the way out

  const restarted = await serve(flags);
  const afterRestart = await ask(clientOf(restarted), history);
  assert.equal(afterRestart.choices[0].message.content, expected.choices[0].message.content);
  assert.ok(afterRestart.usage.prompt_tokens_details.cached_tokens >= firstPrompt);
  assert.equal(await metric(restarted.url, 'hone_prompt_cache_disk_hits_total', 'tiny'), 1);
  // The Ollama API counts the whole prompt, as Ollama does, and says how much was cached.
  const viaOllama = await new Ollama({ host: restarted.url }).chat({
    model: 'tiny', messages: history, options: { temperature: 0, num_predict: 8 } });
  assert.equal(viaOllama.prompt_eval_count, afterRestart.usage.prompt_tokens);
  assert.ok(viaOllama.prompt_eval_cached_count >= firstPrompt,
    `prompt_eval_cached_count ${viaOllama.prompt_eval_cached_count}; the first turn had ${firstPrompt}`);
  const cleared = await (await fetch(restarted.url + '/hone/cache', { method: 'DELETE' })).json();
  assert.ok(cleared.cleared_entries >= 1);
  const empty = await (await fetch(restarted.url + '/hone/cache')).json();
  assert.equal(empty.data.find((m) => m.model === 'tiny').entries.length, 0);
  await restarted.stop();
  const folder = fs.readdirSync(dir).find((f) => f.startsWith('tiny-'));
  assert.ok(folder, `a folder per model: ${fs.readdirSync(dir)}`);
  assert.equal((fs.statSync(path.join(dir, folder)).mode & 0o777), 0o700, 'only this user reads the conversations');
  for (const f of fs.readdirSync(path.join(dir, folder))) assert.equal(fs.statSync(path.join(dir, folder, f)).mode & 0o777, 0o600);
});

test('one tenant never restores another tenant\'s prefix; the same cache_salt shares it', async () => {
  const keys = ['pc-tenant-a', 'pc-tenant-b'];
  const admin = 'pc-admin';
  const s = await serve(['--cache-ram', '64M', '--cache-disk', '0'], { HONE_API_KEYS: keys.join(','), HONE_ADMIN_KEYS: admin });
  const a = clientOf(s, keys[0]), b = clientOf(s, keys[1]);
  const { history, firstPrompt } = await firstTurnThenEvict(a, 'Bo');
  const asB = await ask(b, history);
  assert.ok(asB.usage.prompt_tokens_details.cached_tokens < 16,
    `tenant B found ${asB.usage.prompt_tokens_details.cached_tokens} of tenant A's tokens cached`);
  const asA = await ask(a, history);
  assert.ok(asA.usage.prompt_tokens_details.cached_tokens >= firstPrompt);

  // Two tenants that name the same cache_salt share; the admin sees scopes, not keys.
  const salt = { cache_salt: 'shared-team-7' };
  const salted = await firstTurnThenEvict(a, 'Cy', salt);
  const sharedHit = await ask(b, salted.history, salt);
  assert.ok(sharedHit.usage.prompt_tokens_details.cached_tokens >= salted.firstPrompt);
  // A tenant's key may not list every tenant's entries; the admin's may.
  const asTenant = await fetch(s.url + '/hone/cache', { headers: { Authorization: `Bearer ${keys[0]}` } });
  assert.equal(asTenant.status, 403);
  const listing = await (await fetch(s.url + '/hone/cache', { headers: { Authorization: `Bearer ${admin}` } })).text();
  assert.ok(listing.includes('"entries"'), listing);
  assert.ok(!listing.includes(keys[0]) && !listing.includes('shared-team-7'), 'keys and salts are never listed in clear');
});

test('a route\'s shared system prompt is warmed at start, reused by every tenant, and found on disk after a restart', async () => {
  const fresh = await serve(['--cache-ram', '0', '--cache-disk', '0']);
  const bHistory = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Bo: which plan has no data cap?' }];
  const cHistory = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Cy: how much is Plus?' }];
  const expected = await ask(clientOf(fresh), bHistory);
  const expectedC = await ask(clientOf(fresh), cHistory);
  await fresh.stop();

  const keys = ['sp-tenant-a', 'sp-tenant-b'];
  const admin = 'sp-admin';
  const dir = path.join(TMP, `shared-prompt-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const config = path.join(dir, 'hone.toml');
  fs.writeFileSync(config, ['[[route]]', 'name = "support"', 'targets = ["local:tiny"]',
    `shared_system_prompts = [${JSON.stringify(SYSTEM)}]`].join('\n') + '\n');
  const flags = ['--config', config, '--cache-ram', '64M', '--cache-disk', '64M', '--cache-dir', path.join(dir, 'cache')];
  const env = { HONE_API_KEYS: keys.join(','), HONE_ADMIN_KEYS: admin };
  const s = await serve(flags, env);
  const warmed = Number((await s.waitLog(/tiny: warming a shared system prompt of (\d+) tokens/))[1]);
  assert.ok(warmed > 40, `the system prompt came to ${warmed} tokens`);
  const a = clientOf(s, keys[0]), b = clientOf(s, keys[1]);
  const support = (client, messages) => ask(client, messages, { model: 'support' });

  // Tenant A's first turn already finds the warmed prefix; its conversation stays its own.
  const aHistory = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Ann: my router light is red.' }];
  const aFirst = await support(a, aHistory);
  assert.equal(aFirst.usage.prompt_tokens_details.cached_tokens, warmed);
  const bFirst = await support(b, bHistory);
  assert.equal(bFirst.usage.prompt_tokens_details.cached_tokens, warmed, 'tenant B reuses the shared prefix');
  assert.equal(bFirst.choices[0].message.content, expected.choices[0].message.content,
    'the same greedy answer as a server without any cache');
  const asB = await support(b, aHistory);
  assert.ok(asB.usage.prompt_tokens_details.cached_tokens <= warmed,
    `tenant B found ${asB.usage.prompt_tokens_details.cached_tokens} tokens cached of tenant A's conversation (shared: ${warmed})`);

  const listing = await (await fetch(s.url + '/hone/cache', { headers: { Authorization: `Bearer ${admin}` } })).json();
  const shared = listing.data.find((m) => m.model === 'tiny').entries.filter((e) => e.tenant === 'shared-prefix');
  assert.equal(shared.length, 1, JSON.stringify(listing));
  assert.equal(shared[0].tokens, warmed);
  await s.stop();

  // After a restart the prefix comes from disk: nothing is prefilled to warm it.
  const again = await serve(flags, env);
  const first = await support(clientOf(again, keys[0]), cHistory);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, warmed);
  assert.equal(first.choices[0].message.content, expectedC.choices[0].message.content);
  assert.ok(!/warming a shared system prompt/.test(again.log()), again.log());
  assert.equal(await metric(again.url, 'hone_prompt_cache_disk_hits_total', 'tiny', admin), 1);
});

test('shared_system_prompts that cannot work stop the server at start with the reason', () => {
  const dir = path.join(TMP, `shared-prompt-bad-${process.pid}`);
  fs.mkdirSync(dir, { recursive: true });
  const cases = [
    [['[[upstream]]', 'name = "cloud"', 'base_url = "http://127.0.0.1:9/v1"', '[[route]]', 'name = "r"',
      'targets = ["cloud:m"]', 'shared_system_prompts = ["You are helpful."]'], /needs a local target/],
    [['[[route]]', 'name = "r"', 'targets = ["local:tiny"]', 'shared_system_prompts = "You are helpful."'],
      /shared_system_prompts must be a list of strings/],
    [['[model_options.tiny]', 'shared_system_prompts = [""]'], /list of non-empty strings/],
    [['[model_options.nosuchmodel]', 'shared_system_prompts = ["You are helpful."]'], /nosuchmodel/],
  ];
  for (const [lines, why] of cases) {
    const config = path.join(dir, 'hone.toml');
    fs.writeFileSync(config, lines.join('\n') + '\n');
    const r = spawnSync(HONE, ['serve', '--models', modelsDir(), '--port', '0', '--config', config],
      { encoding: 'utf8', timeout: 30000, env: { ...process.env, XDG_STATE_HOME: dir } });
    assert.equal(r.status, 2, `${lines.join(' | ')}\n${r.stderr}`);
    assert.match(r.stderr, why);
  }
});
