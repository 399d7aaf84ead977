// The web console (/ui/) in a real browser: Debian's chromium, headless,
// driven by puppeteer-core, against real `hone serve` processes with trained
// models from ../shared and scriptable upstreams (fake_upstream.mjs). Each
// test saves a screenshot under HONE_TEST_TMP (HONE_CONSOLE_DOCS=1 also
// refreshes the ones in docs/).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { modelsDir, startServer, post, skipOrFail, TMP } from './helpers.mjs';
import { startFakeUpstream } from './fake_upstream.mjs';

const CHROMIUM = process.env.HONE_CHROMIUM || '/usr/bin/chromium';
const LOCAL = 'stories260K';
const PRICES = ['price_input_per_m = 1000', 'price_output_per_m = 2000'];
const DOCS = path.resolve(import.meta.dirname, '../../docs/console');

let browser, flaky, steady, server, keyed, configFile, stateDir;

function config() {
  const upstream = (name, u, extra = []) =>
    ['[[upstream]]', `name = "${name}"`, `base_url = "${u.url}/v1"`, 'health_interval = "1h"', ...extra];
  const route = (name, targets, extra = []) =>
    ['[[route]]', `name = "${name}"`, `targets = ${JSON.stringify(targets)}`, 'policy = "failover"',
      'retry = { max_attempts = 1, deadline = "20s" }', ...extra];
  return [
    `state_dir = "${stateDir}"`,
    ...upstream('flaky', flaky, ['breaker = { consecutive_failures = 2, failure_rate = 1.0, min_volume = 100000, cooldown = "10s" }']),
    ...upstream('cloud', steady, PRICES),
    ...upstream('cand', steady),
    ...route('flaky-fo', ['flaky:flaky-m', `local:${LOCAL}`]),
    ...route('paid', ['cloud:cloud-m']),
    ...route('canaried', ['cloud:cloud-m'],
      ['canary = { target = "cand:cand-m", steps = [20, 50, 100], hold = "1s", min_requests = 4, max_p99_ratio = 100.0, max_error_rate = 0.5 }']),
    '[[budget]]', 'name = "cloud-month"', 'scope = "upstream:cloud"', 'monthly = 10.0',
  ].join('\n') + '\n';
}

before(async () => {
  if (!fs.existsSync(CHROMIUM)) return;
  flaky = await startFakeUpstream();
  steady = await startFakeUpstream();
  await steady.script({ default: { text: 'the cloud answers', ttft_ms: 5, tokens: 4 } });
  fs.mkdirSync(TMP, { recursive: true });
  stateDir = path.join(TMP, `console-state-${process.pid}`);
  fs.rmSync(stateDir, { recursive: true, force: true });
  configFile = path.join(TMP, `console-test-${process.pid}.toml`);
  fs.writeFileSync(configFile, config());
  server = await startServer(['--config', configFile, '--models', modelsDir(), '--ctx', '512']);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const s of [server, keyed]) if (s) await s.stop();
  for (const u of [flaky, steady]) if (u) await u.close();
  if (configFile) fs.rmSync(configFile, { force: true });
});

// fetch() may not set Host: a raw request does (DNS rebinding's view).
function statusWithHost(url, host) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Host: host } }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', reject);
  });
}

// A page on `base`, recording every request it makes and every console error.
async function open(base, view) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 860 });
  const requests = [];
  const errors = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${base}/ui/#${view}`, { waitUntil: 'load' });
  return { page, requests, errors };
}

async function shot(page, name) {
  const file = path.join(TMP, `console-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  if (process.env.HONE_CONSOLE_DOCS === '1') {
    fs.mkdirSync(DOCS, { recursive: true });
    fs.copyFileSync(file, path.join(DOCS, `${name}.png`));
  }
}

// Waits until `fn` (run in the page) returns a truthy value; returns it.
async function until(page, fn, arg, timeout = 15000) {
  try {
    const handle = await page.waitForFunction(fn, { timeout, polling: 100 }, arg);
    return await handle.jsonValue();
  } catch (e) {
    // What the page showed, to see why it never got there.
    const text = await page.$eval('main', (m) => m.innerText).catch(() => '(no page)');
    throw new Error(`${e.message}\nthe page showed:\n${text.slice(0, 3000)}`);
  }
}

test('the page comes with its CSP and frame rules, loads nothing from elsewhere, and --no-ui turns it off', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const res = await fetch(server.url + '/ui/');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-security-policy'), /^default-src 'self'/);
  assert.match(res.headers.get('content-security-policy'), /frame-ancestors 'none'/);
  assert.equal(res.headers.get('x-frame-options'), 'DENY');
  const html = await res.text();
  const scripts = html.match(/<script\b[^>]*>/g) || [];
  assert.ok(scripts.length >= 1 && scripts.every((s) => /\ssrc=/.test(s)), `no inline script: ${scripts}`);
  for (const f of ['app.js', 'app.css']) {
    const r = await fetch(`${server.url}/ui/${f}`);
    assert.equal(r.status, 200, f);
    assert.match(r.headers.get('content-security-policy'), /default-src 'self'/);
  }
  assert.equal((await fetch(server.url + '/ui/missing.js')).status, 404);
  // Another site's page may not read the console through the user's browser.
  assert.equal(await statusWithHost(server.url + '/ui/', 'evil.example'), 403);

  const { page, requests, errors } = await open(server.url, 'chat');
  await until(page, () => document.querySelectorAll('[data-testid=model-select] option').length > 0);
  for (const view of ['models', 'routes', 'spend', 'canaries', 'metrics']) {
    await page.click(`a[data-view=${view}]`);
    await until(page, (v) => location.hash === '#' + v && document.querySelector('main h2'), view);
  }
  const origin = new URL(server.url).origin;
  const elsewhere = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:'));
  assert.deepEqual(elsewhere, [], 'every request stays on the server');
  assert.deepEqual(errors, [], 'no script or CSP errors');
  await page.close();

  const off = await startServer(['--models', modelsDir(), '--no-ui']);
  try {
    assert.equal((await fetch(off.url + '/ui/')).status, 404);
    assert.doesNotMatch(off.log(), /web console/);
  } finally {
    await off.stop();
  }
});

test('the playground streams an answer from a trained model, with its timings and target', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page, errors, requests } = await open(server.url, 'chat');
  await until(page, (m) => [...document.querySelectorAll('[data-testid=model-select] option')].some((o) => o.value === m), LOCAL);
  await page.select('[data-testid=model-select]', LOCAL);
  await page.type('[data-testid=prompt]', 'Once upon a time');
  await page.click('[data-testid=send]');
  const answer = await until(page, () => {
    const a = [...document.querySelectorAll('.msg.assistant')].pop();
    const stats = a?.querySelector('[data-testid=answer-stats]')?.textContent || '';
    return a && /TTFT \d+ ms/.test(stats) && /\d+ tokens/.test(stats) ? { text: a.querySelector('.text').textContent, stats } : null;
  });
  assert.ok(answer.text.trim().length > 10, `the story: ${answer.text}`);
  assert.match(answer.text, /[a-z]+ [a-z]+/, 'words, from the trained model');
  assert.match(answer.stats, /tok\/s/);
  assert.match(answer.stats, /local/);
  assert.match(answer.stats, /cached \d+ of \d+ prompt tokens/);
  // Kept in this browser only: localStorage holds it, the server keeps no copy.
  // Saved by an effect that runs after the render showing the stats: wait for it.
  const saved = await until(page, () => {
    const s = JSON.parse(localStorage.getItem('hone.chat') || 'null');
    return s?.messages?.length === 2 ? s : null;
  });
  assert.equal(saved.messages.length, 2);
  // Regenerate replaces the last answer instead of adding one.
  const chats = () => requests.filter((u) => u.endsWith('/v1/chat/completions')).length;
  assert.equal(chats(), 1);
  await page.click('[data-testid=regenerate]');
  await until(page, () => document.querySelector('[data-testid=send]') && document.querySelectorAll('.msg.assistant').length === 1 &&
    /TTFT \d+ ms/.test(document.querySelector('.msg.assistant [data-testid=answer-stats]')?.textContent || ''));
  assert.equal(chats(), 2, 'regenerate asked again, in place of the first answer');
  assert.deepEqual(errors, []);
  await shot(page, 'chat');

  // A routed answer names the upstream that gave it.
  await page.select('[data-testid=model-select]', 'paid');
  await page.type('[data-testid=prompt]', 'And then?');
  await page.click('[data-testid=send]');
  const target = await until(page, () => {
    const all = document.querySelectorAll('.msg.assistant');
    const a = all[all.length - 1];
    const s = a?.querySelector('[data-testid=answer-target]')?.textContent;
    return all.length === 2 && /TTFT \d+ ms/.test(a.textContent) ? s : null;
  });
  assert.equal(target, 'cloud:cloud-m');
  // A tool call is shown as a call, not as text.
  await steady.script({ default: { text: 'the cloud answers', ttft_ms: 5, tokens: 4 },
    queue: [{ tool_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
  await page.type('[data-testid=prompt]', 'Weather in Paris?');
  await page.click('[data-testid=send]');
  const call = await until(page, () => {
    const all = document.querySelectorAll('.msg.assistant');
    return all.length === 3 ? all[2].querySelector('[data-testid=tool-call]')?.textContent : null;
  });
  assert.match(call, /get_weather/);
  assert.match(call, /Paris/);
  await page.close();
});

test('a page without the key asks for it, keeps it in sessionStorage, never in the URL', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  keyed = await startServer(['--models', modelsDir()], { HONE_API_KEYS: 'sk-console-test' });
  const { page, requests } = await open(keyed.url, 'chat');
  const refusals = [];
  page.on('response', (r) => r.status() === 401 && refusals.push(r.url()));
  await page.waitForSelector('[data-testid=key-form]', { timeout: 10000 });
  assert.equal(await page.$('[data-testid=model-select]'), null, 'nothing shown before the key');
  await shot(page, 'key');
  const before = refusals.length;
  await page.type('input[name=api-key]', 'sk-wrong');
  await page.click('[data-testid=key-form] button[type=submit]');
  // Refused by the server (a 401 for the wrong key), then asked again.
  const deadline = Date.now() + 10000;
  while (refusals.length === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.ok(refusals.length > before, 'the wrong key was sent and refused');
  await page.waitForSelector('[data-testid=key-form]');
  assert.equal(await page.$('[data-testid=model-select]'), null);
  await page.$eval('input[name=api-key]', (i) => (i.value = ''));
  await page.type('input[name=api-key]', 'sk-console-test');
  await page.click('[data-testid=key-form] button[type=submit]');
  await until(page, (m) => [...document.querySelectorAll('[data-testid=model-select] option')].some((o) => o.value === m), LOCAL);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('hone.apiKey')), 'sk-console-test');
  assert.equal(await page.evaluate(() => localStorage.getItem('hone.apiKey')), null);
  assert.ok(requests.every((u) => !u.includes('sk-console-test')), 'the key is in no URL');
  await page.close();
});

test('the routes view shows a breaker open within seconds of failures, and closed after recovery', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page } = await open(server.url, 'routes');
  const breaker = () => document.querySelector('[data-route="flaky-fo"] [data-target="flaky:flaky-m"] [data-breaker]')?.dataset.breaker;
  assert.equal(await until(page, breaker), 'closed');
  await flaky.script({ default: { status: 500 } });
  const chat = { model: 'flaky-fo', max_tokens: 4, messages: [{ role: 'user', content: 'hello' }] };
  for (let i = 0; i < 3; ++i) assert.equal((await post(server.url + '/v1/chat/completions', chat)).status, 200);
  const opened = Date.now();
  await until(page, () => document.querySelector('[data-route="flaky-fo"] [data-target="flaky:flaky-m"] [data-breaker]')?.dataset.breaker === 'open');
  assert.ok(Date.now() - opened < 5000, 'shown within a poll or two');
  await shot(page, 'routes');
  // Recovered: after the 10 s cooldown one request is the probe that closes it.
  await flaky.script({ default: { text: 'flaky is back', ttft_ms: 5, tokens: 4 } });
  await new Promise((r) => setTimeout(r, Math.max(0, opened + 10500 - Date.now())));
  const back = await post(server.url + '/v1/chat/completions', chat);
  assert.equal(back.status, 200);
  await until(page, () => document.querySelector('[data-route="flaky-fo"] [data-target="flaky:flaky-m"] [data-breaker]')?.dataset.breaker === 'closed');
  await page.close();
});

test('the spend view moves a budget bar after priced requests', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page } = await open(server.url, 'spend');
  const before = await until(page, () => {
    const s = Number(document.querySelector('[data-budget="cloud-month"][data-window="monthly"]')?.dataset.share ?? -1);
    return s >= 0 ? String(s) : null;
  });
  const chat = { model: 'paid', max_tokens: 8, messages: [{ role: 'user', content: 'a priced question' }] };
  for (let i = 0; i < 3; ++i) assert.equal((await post(server.url + '/v1/chat/completions', chat)).status, 200);
  const after = await until(page, (b) => {
    const s = Number(document.querySelector('[data-budget="cloud-month"][data-window="monthly"]')?.dataset.share ?? -1);
    return s > Number(b) ? String(s) : null;
  }, before);
  assert.ok(Number(after) > Number(before), `${before} -> ${after}`);
  const width = await page.$eval('[data-budget="cloud-month"][data-window="monthly"] .fill', (e) => parseFloat(e.style.width));
  assert.ok(width > 0, `the bar is drawn: ${width}%`);
  await until(page, () => document.querySelector('[data-testid=spend-by-day] canvas'));
  await shot(page, 'spend');
  await page.close();
});

test('a canary\'s step and its rollback appear as they happen', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page } = await open(server.url, 'canaries');
  const percent = () => document.querySelector('[data-canary="canaried"] [data-testid=canary-step]')?.dataset.percent;
  assert.equal(await until(page, percent), '20');
  // Conversations (distinct users) until the candidate's window passes and it steps.
  let stepped = false;
  for (let i = 0; i < 200 && !stepped; ++i) {
    const body = { model: 'canaried', user: `u${i}`, max_tokens: 4, messages: [{ role: 'user', content: `hello ${i}` }] };
    assert.equal((await post(server.url + '/v1/chat/completions', body)).status, 200);
    stepped = (await (await fetch(server.url + '/hone/routes')).json()).routes.find((r) => r.name === 'canaried').canary.percent > 20;
  }
  assert.ok(stepped, 'the canary took its next step');
  await until(page, () => Number(document.querySelector('[data-canary="canaried"] [data-testid=canary-step]')?.dataset.percent) > 20);
  await shot(page, 'canaries');
  // Roll back from the page (no admin keys on this server: any caller may).
  const buttons = await page.$$('[data-canary="canaried"] button');
  await buttons[1].click();
  await until(page, () => document.querySelector('[data-canary="canaried"] [data-testid=canary-state]')?.dataset.state === 'rolled_back');
  const log = await page.$eval('[data-testid=canary-log]', (e) => e.textContent);
  assert.match(log, /canaried: rolled_back/);
  assert.match(log, /canaried: ramping (50|100)%/);
  await page.close();
});

test('the metrics view charts tokens/s, TTFT, queue and cache hit rate from /metrics as traffic flows', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page, errors } = await open(server.url, 'metrics');
  await until(page, () => document.querySelectorAll('.chart canvas').length === 4);
  // Traffic while the page polls: the tok/s chart gets a value above zero,
  // the TTFT chart a p50, and the cache chart a hit rate (the same prompt again).
  const chat = { model: LOCAL, max_tokens: 48, messages: [{ role: 'user', content: 'Once upon a time there was a cat' }] };
  const deadline = Date.now() + 20000;
  let seen = false;
  while (!seen && Date.now() < deadline) {
    assert.equal((await post(server.url + '/v1/chat/completions', chat)).status, 200);
    seen = await page.evaluate(() => ['chart-tps', 'chart-ttft', 'chart-cache']
      .every((id) => Number(document.querySelector(`[data-testid=${id}]`).dataset.last) > 0));
  }
  const last = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('.chart')]
    .map((c) => [c.dataset.testid, `${c.dataset.last} (${c.dataset.points} points)`])));
  assert.ok(seen, `tok/s, TTFT p50 and cache hit rate all charted: ${JSON.stringify(last)}`);
  await until(page, () => Number(document.querySelector('[data-testid=chart-tps]').dataset.points) >= 4);
  assert.deepEqual(errors, []);
  await shot(page, 'metrics');
  await page.close();
});

test('the models view shows what is loaded and unloads and loads a model', async (t) => {
  if (!browser) return skipOrFail(t, `no chromium at ${CHROMIUM} (apt-get install chromium)`);
  const { page } = await open(server.url, 'models');
  const state = (m) => document.querySelector(`[data-model="${m}"] td:nth-child(2)`)?.textContent;
  assert.match(await until(page, state, LOCAL), /^loaded/);
  const row = await page.$eval(`[data-model="${LOCAL}"]`, (r) => [...r.cells].map((c) => c.textContent));
  assert.match(row[3], /^\d+ of \d+$/, 'busy slots of the model\'s slots');
  assert.match(row[9], /^(none \(defaults\)|[^/]+\.toml)$/, 'the tuned profile, by file name only');
  const routes = (await (await fetch(server.url + '/hone/routes')).json()).routes.map((r) => r.name);
  for (const r of routes) assert.equal(await page.$(`[data-model="${r}"]`), null, `route ${r} is not a model`);
  await shot(page, 'models');
  const click = async (label) => {
    const buttons = await page.$$(`[data-model="${LOCAL}"] button`);
    assert.equal(await buttons[0].evaluate((b) => b.textContent), label);
    await buttons[0].click();
  };
  await click('Unload');
  await until(page, (m) => document.querySelector(`[data-model="${m}"] td:nth-child(2)`)?.textContent === 'not loaded', LOCAL);
  const ps = await (await fetch(server.url + '/api/ps')).json();
  assert.ok(!ps.models.some((m) => m.name === LOCAL), 'the server unloaded it');
  await click('Load');
  await until(page, (m) => /^loaded/.test(document.querySelector(`[data-model="${m}"] td:nth-child(2)`)?.textContent || ''), LOCAL);
  await page.close();
});
