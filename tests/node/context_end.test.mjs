// A generation that reaches the end of its slot's context (--ctx) mid-answer
// ends as a length cut on every API, streamed and not: OpenAI
// finish_reason "length", the Responses API's "incomplete", Anthropic's
// stop_reason "max_tokens", Ollama's done_reason "length"; never an error.
//
// stories260K (trained, no chat template) tells a greedy story from "Once upon
// a time" that has no end-of-text for over 237 tokens, so with --ctx 256 the
// context fills first: each test checks prompt + completion == 256 tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { modelsDir, startServer } from './helpers.mjs';

const CTX = 256;
const model = 'stories260K';
const user = [{ role: 'user', content: 'Once upon a time' }];

let server, openai, anthropic, ollama;
before(async () => {
  // One thread: a 260K model needs no more, and two threads that spin-wait
  // for each other crawl on a loaded 2-core machine.
  server = await startServer(['--models', modelsDir(), '--slots', '1', '--ctx', String(CTX), '--threads', '1']);
  openai = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  ollama = new Ollama({ host: server.url });
});
after(async () => server && (await server.stop()));

function filled(prompt, completion, what) {
  assert.equal(prompt + completion, CTX, `${what}: ${prompt} prompt + ${completion} completion tokens should fill the ${CTX}-token context`);
}

test('OpenAI chat completions: finish_reason "length" at the end of the context, streamed and not', async () => {
  const ask = { model, messages: user, temperature: 0 };  // no max_tokens: until the context is full
  const r = await openai.chat.completions.create(ask);
  assert.equal(r.choices[0].finish_reason, 'length');
  filled(r.usage.prompt_tokens, r.usage.completion_tokens, 'chat');
  let text = '', finish = null, usage = null;
  for await (const c of await openai.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } })) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].delta.content ?? '';
      finish = c.choices[0].finish_reason ?? finish;
    }
  }
  assert.equal(finish, 'length');
  filled(usage.prompt_tokens, usage.completion_tokens, 'streamed chat');
  assert.equal(text, r.choices[0].message.content);
});

test('OpenAI completions: finish_reason "length" at the end of the context, streamed and not', async () => {
  // max_tokens at the context: the context ends first, after the prompt.
  const ask = { model, prompt: 'Once upon a time', max_tokens: CTX, temperature: 0 };
  const r = await openai.completions.create(ask);
  assert.equal(r.choices[0].finish_reason, 'length');
  filled(r.usage.prompt_tokens, r.usage.completion_tokens, 'completion');
  assert.ok(r.usage.completion_tokens < CTX);
  let text = '', finish = null, usage = null;
  for await (const c of await openai.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } })) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].text;
      finish = c.choices[0].finish_reason ?? finish;
    }
  }
  assert.equal(finish, 'length');
  filled(usage.prompt_tokens, usage.completion_tokens, 'streamed completion');
  assert.equal(text, r.choices[0].text);
});

test('Responses: status "incomplete" (max_output_tokens) at the end of the context, streamed and not', async () => {
  const ask = { model, input: 'Once upon a time', temperature: 0 };
  const r = await openai.responses.create(ask);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.error, null);
  filled(r.usage.input_tokens, r.usage.output_tokens, 'response');
  const types = [];
  let text = '', final = null;
  for await (const ev of await openai.responses.create({ ...ask, stream: true })) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.incomplete' || ev.type === 'response.completed' || ev.type === 'response.failed') final = ev.response;
  }
  assert.ok(!types.includes('error') && !types.includes('response.failed'), types.join(' '));
  assert.equal(types.at(-1), 'response.incomplete');
  assert.equal(final.incomplete_details.reason, 'max_output_tokens');
  filled(final.usage.input_tokens, final.usage.output_tokens, 'streamed response');
  assert.equal(text, r.output_text);
});

test('Anthropic messages: stop_reason "max_tokens" at the end of the context, before max_tokens, streamed and not', async () => {
  const ask = { model, max_tokens: CTX, temperature: 0, messages: user };
  const m = await anthropic.messages.create(ask);
  assert.equal(m.stop_reason, 'max_tokens');
  filled(m.usage.input_tokens, m.usage.output_tokens, 'message');
  assert.ok(m.usage.output_tokens < ask.max_tokens, 'the context ended it, not max_tokens');
  const stream = anthropic.messages.stream(ask);
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  const final = await stream.finalMessage();
  assert.ok(!types.includes('error'), types.join(' '));
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(final.stop_reason, 'max_tokens');
  filled(final.usage.input_tokens ?? m.usage.input_tokens, final.usage.output_tokens, 'streamed message');
  assert.equal(final.content[0].text, m.content[0].text);
});

test('Ollama chat and generate: done_reason "length" at the end of the context, streamed and not', async () => {
  // No num_predict: until the context is full.
  const asks = [
    ['chat', (o) => ollama.chat({ model, messages: user, options: { temperature: 0 }, ...o }), (p) => p.message.content],
    ['generate', (o) => ollama.generate({ model, prompt: 'Once upon a time', options: { temperature: 0 }, ...o }), (p) => p.response],
  ];
  for (const [what, call, textOf] of asks) {
    const r = await call({ stream: false });
    assert.equal(r.done, true, what);
    assert.equal(r.done_reason, 'length', what);
    filled(r.prompt_eval_count, r.eval_count, what);
    let text = '', last = null;
    for await (const part of await call({ stream: true })) {
      text += textOf(part);
      last = part;
    }
    assert.equal(last.done, true, what);
    assert.equal(last.done_reason, 'length', what);
    filled(last.prompt_eval_count, last.eval_count, `streamed ${what}`);
    assert.equal(text, textOf(r), what);
  }
});
