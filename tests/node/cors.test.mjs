// CORS: a browser page on --cors-origin may call hone. Before a JSON POST
// with a key the browser sends a preflight, OPTIONS with
// Access-Control-Request-Method and -Headers, and sends the request only if
// the answer allows its origin, method and every header it asked for; it then
// lets the page read an answer only if it carries Access-Control-Allow-Origin.
// Without --cors-origin no answer carries it, so no page reads one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { modelsDir, startServer } from './helpers.mjs';

const ORIGIN = 'https://app.example';
const KEY = 'sk-cors-test';

// Raw HTTP: fetch would not send a preflight's headers as a browser does.
function request(url, method, path, headers = {}, body) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function preflight(url, path, requestHeaders, origin = ORIGIN) {
  return request(url, 'OPTIONS', path, {
    Origin: origin,
    'Access-Control-Request-Method': 'POST',
    'Access-Control-Request-Headers': requestHeaders,
  });
}

// What a browser checks in a preflight's answer (the Fetch standard's CORS check).
function allows(res, requestHeaders) {
  assert.ok(res.status >= 200 && res.status < 300, `a preflight answer must be 2xx, got ${res.status} ${res.text}`);
  assert.equal(res.headers['access-control-allow-origin'], ORIGIN);
  const methods = (res.headers['access-control-allow-methods'] ?? '').split(',').map((m) => m.trim());
  assert.ok(methods.includes('POST'), `POST in ${methods}`);
  // '*' does not cover Authorization, and means nothing to a request with credentials: list them.
  const allowed = (res.headers['access-control-allow-headers'] ?? '').split(',').map((h) => h.trim().toLowerCase());
  const missing = requestHeaders.split(',').map((h) => h.trim().toLowerCase()).filter((h) => h && !allowed.includes(h));
  assert.deepEqual(missing, [], `headers the page asked for and the answer does not allow (allowed: ${allowed})`);
}

let cors, plain;
before(async () => {
  const args = ['--models', modelsDir(), '--slots', '1', '--ctx', '256', '--threads', '1'];
  cors = await startServer([...args, '--cors-origin', ORIGIN], { HONE_API_KEYS: KEY });
  plain = await startServer(args, { HONE_API_KEYS: KEY });
});
after(async () => {
  await cors?.stop();
  await plain?.stop();
});

test('with --cors-origin, the preflight of each API allows the origin, POST and the headers asked for, without a key', async () => {
  const cases = [
    ['/v1/chat/completions', 'authorization, content-type'],
    ['/v1/completions', 'content-type, authorization'],
    ['/v1/responses', 'authorization,content-type'],
    ['/v1/messages', 'anthropic-version, content-type, x-api-key'],
    ['/v1/messages/count_tokens', 'content-type, x-api-key'],
    ['/api/chat', 'content-type'],
    ['/api/generate', 'Content-Type'],
  ];
  for (const [path, headers] of cases) {
    const res = await preflight(cors.url, path, headers);
    allows(res, headers);
    assert.equal(res.text, '', path);
  }
});

test('with --cors-origin, the answers themselves carry the origin: a completion, a stream and a 401', async () => {
  const body = JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
  const json = { Origin: ORIGIN, 'Content-Type': 'application/json' };
  const ok = await request(cors.url, 'POST', '/v1/completions', { ...json, Authorization: `Bearer ${KEY}` }, body);
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.headers['access-control-allow-origin'], ORIGIN);
  const stream = await request(cors.url, 'POST', '/v1/completions', { ...json, Authorization: `Bearer ${KEY}` },
                               JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 2, stream: true }));
  assert.equal(stream.status, 200, stream.text);
  assert.match(stream.headers['content-type'], /text\/event-stream/);
  assert.equal(stream.headers['access-control-allow-origin'], ORIGIN);
  // The page reads why it was refused.
  const refused = await request(cors.url, 'POST', '/v1/completions', { ...json, Authorization: 'Bearer sk-wrong' }, body);
  assert.equal(refused.status, 401);
  assert.equal(refused.headers['access-control-allow-origin'], ORIGIN);
  // Another site's page is never told it may read.
  const other = await preflight(cors.url, '/v1/completions', 'content-type', 'https://evil.example');
  assert.notEqual(other.headers['access-control-allow-origin'], 'https://evil.example');
  assert.notEqual(other.headers['access-control-allow-origin'], '*');
});

test('with --cors-origin, the official JavaScript SDKs can pass the preflight from a browser page', async () => {
  // What openai 6.x and @anthropic-ai/sdk send beyond the browser's own headers
  // (captured from the clients; the browser adds Accept-Language and Sec-Fetch-* itself).
  const stainless = 'x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version';
  allows(await preflight(cors.url, '/v1/chat/completions', `authorization, content-type, ${stainless}`), `authorization, content-type, ${stainless}`);
  const anthropic = `anthropic-dangerous-direct-browser-access, anthropic-version, content-type, x-api-key, x-stainless-timeout, ${stainless}`;
  allows(await preflight(cors.url, '/v1/messages', anthropic), anthropic);
});

test('without --cors-origin no answer lets a page read it: no Access-Control-Allow-Origin, the preflight is not allowed', async () => {
  for (const origin of [ORIGIN, 'http://localhost:5173']) {
    const res = await preflight(plain.url, '/v1/chat/completions', 'authorization, content-type', origin);
    assert.equal(res.headers['access-control-allow-origin'], undefined, `${origin}: ${JSON.stringify(res.headers)}`);
    assert.equal(res.headers['access-control-allow-headers'], undefined, origin);
    assert.ok(res.status >= 400, `${origin}: ${res.status}`);
  }
  const body = JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
  const r = await request(plain.url, 'POST', '/v1/completions',
                          { Origin: 'http://localhost:5173', 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` }, body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers['access-control-allow-origin'], undefined);
});
