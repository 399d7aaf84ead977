// The official `ollama` client against hone serve on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { modelsDir, startServer, sleep } from './helpers.mjs';

let server, ollama;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '2', '--ctx', '512']);
  ollama = new Ollama({ host: server.url });
});
after(async () => server && (await server.stop()));

test('version, tags and show', async () => {
  assert.ok((await ollama.version()).version);
  const tags = await ollama.list();
  assert.ok(tags.models.some((m) => m.name === 'stories260K' && m.details.format === 'gguf'));
  const show = await ollama.show({ model: 'tiny' });
  assert.match(show.template, /im_start/);
  assert.equal(show.details.family, 'qwen2');
});

test('generate streams NDJSON by default and ends with statistics', async () => {
  const stream = await ollama.generate({ model: 'stories260K', prompt: 'Once upon a time', stream: true, options: { num_predict: 12, temperature: 0 } });
  let text = '';
  let last;
  for await (const part of stream) {
    text += part.response;
    last = part;
  }
  assert.ok(text.length > 0);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, 12);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_duration']) {
    assert.equal(typeof last[k], 'number', k);
  }
  assert.ok(last.prompt_eval_count > 0);
});

test('chat, streamed and not', async () => {
  const r = await ollama.chat({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], stream: false, options: { num_predict: 6, seed: 1 } });
  assert.equal(r.message.role, 'assistant');
  assert.equal(r.done, true);
  assert.ok(r.eval_count <= 6);
  // Under greedy decoding, the streamed pieces add up to the non-streamed answer.
  const ask = { model: 'stories260K', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 8, temperature: 0 } };
  const whole = await ollama.chat({ ...ask, stream: false });
  const stream = await ollama.chat({ ...ask, stream: true });
  let parts = 0, text = '', last = null;
  for await (const p of stream) {
    if (!p.done) parts++;
    text += p.message.content;
    last = p;
  }
  assert.ok(parts > 0);
  assert.ok(text.length > 0);
  assert.equal(text, whole.message.content);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(last.eval_count, whole.eval_count);
});

test('format: a JSON schema', async () => {
  const r = await ollama.generate({
    model: 'tiny',
    prompt: 'mood?',
    stream: false,
    format: { type: 'object', properties: { mood: { enum: ['happy', 'sad'] } } },
    options: { num_predict: 32 },
  });
  assert.ok(['happy', 'sad'].includes(JSON.parse(r.response).mood));
});

test('embed and legacy embeddings', async () => {
  const e = await ollama.embed({ model: 'stories260K', input: ['one', 'two'] });
  assert.equal(e.embeddings.length, 2);
  assert.ok(e.embeddings[0].length > 0);
  const legacy = await ollama.embeddings({ model: 'stories260K', prompt: 'one' });
  assert.equal(legacy.embedding.length, e.embeddings[0].length);
  for (let i = 0; i < 5; ++i) assert.ok(Math.abs(legacy.embedding[i] - e.embeddings[0][i]) < 1e-5);
});

test('keep_alive: a duration expires, 0 unloads, and ps shows residency', async () => {
  await ollama.generate({ model: 'stories260K', prompt: 'hi', stream: false, keep_alive: '1s', options: { num_predict: 2 } });
  assert.ok((await ollama.ps()).models.some((m) => m.name === 'stories260K'));
  // Wait on the event (ps no longer lists it), not a fixed time.
  let resident = true;
  for (let i = 0; i < 100 && resident; ++i) {
    resident = (await ollama.ps()).models.some((m) => m.name === 'stories260K');
    if (resident) await sleep(100);
  }
  assert.ok(!resident, 'still resident 10 s after a keep_alive of 1s');
  const load = await ollama.generate({ model: 'tiny', prompt: '', keep_alive: -1 });
  assert.equal(load.done_reason, 'load');
  assert.ok((await ollama.ps()).models.some((m) => m.name === 'tiny'));
  const unload = await ollama.generate({ model: 'tiny', prompt: '', keep_alive: 0 });
  assert.equal(unload.done_reason, 'unload');
  assert.ok(!(await ollama.ps()).models.some((m) => m.name === 'tiny'));
});

test('unknown model is an error from the client', async () => {
  await assert.rejects(ollama.chat({ model: 'llama9', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status_code === 404);
});

test('chat messages are checked as on the OpenAI side: an unknown role is a 400', async () => {
  await assert.rejects(
    ollama.chat({ model: 'tiny', messages: [{ role: 'wizard', content: 'x' }], stream: false }),
    (e) => e.status_code === 400 && /unknown message role 'wizard'/.test(e.message),
  );
  const res = await fetch(server.url + '/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'tiny', messages: [{ content: 'x' }] }),
  });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error, /needs a 'role'/);
});
