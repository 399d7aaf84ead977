// Message fields of the wrong type, on every API, through the official
// clients (they send what they are given): HTTP 400 in the API's own error
// format, naming the field's path, and no model loaded for it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { modelsDir, startServer, post } from './helpers.mjs';

let server, openai, anthropic, ollama;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '1', '--ctx', '256']);
  openai = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  ollama = new Ollama({ host: server.url });
});
after(async () => server && (await server.stop()));

// The path as the message quotes it: 'messages[0].content'.
const names = (path) => new RegExp(`'${path.replace(/[[\].]/g, '\\$&')}'`);

test('OpenAI chat: content, parts and role of the wrong type are 400s naming the field', async () => {
  const cases = [
    [[{ role: 'user', content: 42 }], 'messages[0].content'],
    [[{ role: 'user', content: 'hi' }, { role: 'assistant', content: { text: 'x' } }], 'messages[1].content'],
    [[{ role: 'user', content: [{ type: 'video', text: 'x' }] }], 'messages[0].content[0].type'],
    [[{ role: 'user', content: [{ type: 'text', text: 3 }] }], 'messages[0].content[0].text'],
    [[{ role: 'user', content: ['hi'] }], 'messages[0].content[0]'],
    [[{ role: 5, content: 'hi' }], 'messages[0].role'],
  ];
  for (const [messages, path] of cases) {
    await assert.rejects(openai.chat.completions.create({ model: 'stories260K', max_tokens: 2, messages }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.error.type, 'invalid_request_error');
      assert.match(e.error.message, names(path));
      return true;
    });
  }
});

test('OpenAI completions: a prompt that is not text is a 400 naming it', async () => {
  for (const [prompt, path] of [[42, 'prompt'], [['Once', 7], 'prompt[1]']]) {
    await assert.rejects(openai.completions.create({ model: 'stories260K', max_tokens: 2, prompt }),
                         (e) => e instanceof OpenAI.BadRequestError && names(path).test(e.error.message));
  }
});

test('Responses: item content and parts of the wrong type are 400s naming the field', async () => {
  const cases = [
    [[{ role: 'user', content: 42 }], 'input[0].content'],
    [[{ role: 'user', content: [{ type: 'input_text', text: false }] }], 'input[0].content[0].text'],
    [[{ role: 'user', content: [{ type: 'input_video' }] }], 'input[0].content[0].type'],
    [[{ role: ['user'], content: 'hi' }], 'input[0].role'],
  ];
  for (const [input, path] of cases) {
    await assert.rejects(openai.responses.create({ model: 'stories260K', input }),
                         (e) => e instanceof OpenAI.BadRequestError && names(path).test(e.error.message));
  }
});

test('Anthropic: content blocks of the wrong type are 400s in Anthropic\'s envelope', async () => {
  const cases = [
    [{ messages: [{ role: 'user', content: 42 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user', content: [{ type: 'mystery' }] }] }, 'messages[0].content[0].type'],
    [{ messages: [{ role: 'user', content: [{ type: 'text', text: {} }] }] }, 'messages[0].content[0].text'],
    [{ messages: [{ role: 1, content: 'hi' }] }, 'messages[0].role'],
    [{ system: 7, messages: [{ role: 'user', content: 'hi' }] }, 'system'],
    [{ system: [{ type: 'text', text: 2 }], messages: [{ role: 'user', content: 'hi' }] }, 'system[0].text'],
  ];
  for (const [body, path] of cases) {
    await assert.rejects(anthropic.messages.create({ model: 'stories260K', max_tokens: 2, ...body }), (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, String(e));
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'invalid_request_error');
      assert.match(e.error.error.message, names(path));
      return true;
    });
  }
});

test('Ollama chat and generate: wrong types are 400s in Ollama\'s envelope', async () => {
  await assert.rejects(ollama.chat({ model: 'stories260K', stream: false, messages: [{ role: 'user', content: 42 }] }),
                       (e) => e.status_code === 400 && names('messages[0].content').test(e.message));
  await assert.rejects(ollama.chat({ model: 'stories260K', stream: false, messages: [{ role: null, content: 'hi' }] }),
                       (e) => e.status_code === 400 && /needs a 'role'/.test(e.message));
  await assert.rejects(ollama.generate({ model: 'stories260K', stream: false, prompt: 42 }),
                       (e) => e.status_code === 400 && names('prompt').test(e.message));
  // The raw envelope: {"error": "..."}, a string.
  const r = await post(server.url + '/api/chat', { model: 'stories260K', stream: false, messages: [{ role: 'user', content: [7] }] });
  assert.equal(r.status, 400);
  assert.equal(typeof r.json.error, 'string');
  assert.match(r.json.error, names('messages[0].content[0]'));
});

test('no refused request loaded a model; a well-typed one still does', async () => {
  assert.deepEqual((await ollama.ps()).models, []);
  const ok = await openai.chat.completions.create({
    model: 'stories260K', max_tokens: 2, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Once upon' }, { type: 'text', text: ' a time' }] }],
  });
  assert.equal(ok.choices[0].finish_reason, 'length');
  assert.deepEqual((await ollama.ps()).models.map((m) => m.name), ['stories260K']);
});
