// A body over --max-body is answered with 413 at once, and the server then
// lingers (reads and discards what the client still sends) before it closes,
// so clients that send their whole body before they read get the 413 and its
// message: Python's http.client (requests is built on it) and Node's fetch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { startServer, modelsDir, post } from './helpers.mjs';

const SCRIPT = path.join(import.meta.dirname, 'py', 'send_then_read.py');
const BODY = 8 << 20;  // far more than the socket buffers hold: the client is still sending when the 413 goes out

let server, port;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--max-body', '64K', '--slots', '1', '--ctx', '256'],
                             { HONE_API_KEYS: 'sk-linger' });
  port = new URL(server.url).port;
});
after(async () => server && server.stop());

function python(...args) {
  return new Promise((resolve, reject) => {
    execFile('python3', [SCRIPT, port, ...args], { timeout: 60000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`python3 ${args.join(' ')} failed: ${stderr || err.message}`));
      resolve(JSON.parse(stdout));
    });
  });
}

test('Python http.client reads the 413 after sending 8 MiB with a Content-Length', async () => {
  // No key: the declared size is refused before the key is checked, and before a byte of the body is read.
  const r = await python('/v1/completions', String(BODY), 'length');
  assert.equal(r.status, 413);
  assert.equal(r.connection, 'close');
  assert.equal(r.body.error.code, 'payload_too_large');
  assert.match(r.body.error.message, /--max-body \(64K\)/);
});

test('Python http.client reads the 413 after sending 8 MiB chunked (read up to the limit, the rest discarded)', async () => {
  const r = await python('/v1/messages', String(BODY), 'chunked', 'sk-linger');
  assert.equal(r.status, 413);
  assert.equal(r.body.type, 'error');  // Anthropic's envelope on its path
  assert.equal(r.body.error.type, 'request_too_large');
});

test('Python http.client reads a 401 sent before its 8 MiB chunked body was read', async () => {
  const r = await python('/v1/completions', String(BODY), 'chunked');
  assert.equal(r.status, 401);
  assert.match(r.body.error.message, /API key/);
});

test('Node fetch reads the 413 and its message after sending 8 MiB', async () => {
  const big = JSON.stringify({ model: 'stories260K', prompt: 'a'.repeat(BODY) });
  const r = await post(server.url + '/v1/chat/completions', big, { Authorization: 'Bearer sk-linger' });
  assert.equal(r.status, 413, r.text);
  assert.match(r.json.error.message, /--max-body \(64K\)/);
  assert.equal(r.headers.get('content-type'), 'application/json', 'one Content-Type header, not two');
  // The server serves on: the refused connections gave their workers back.
  const ok = await post(server.url + '/v1/completions', { model: 'stories260K', prompt: 'Once', max_tokens: 1 },
                        { Authorization: 'Bearer sk-linger' });
  assert.equal(ok.status, 200, ok.text);
});
