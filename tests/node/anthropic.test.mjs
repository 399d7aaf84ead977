// Anthropic's Messages API (/v1/messages) through the official
// `@anthropic-ai/sdk` client against a real `hone serve` (synthetic Qwen2.5,
// random weights), with an API key sent as x-api-key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { modelsDir, startServer, post } from './helpers.mjs';

const lookupOrder = {
  name: 'lookup_order',
  description: 'Look up an order by its number',
  input_schema: {
    type: 'object',
    properties: { order_id: { type: 'integer' }, email: { type: 'string', maxLength: 40 } },
    required: ['order_id'],
  },
};

let server, client;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '2', '--ctx', '2048'], { HONE_API_KEYS: 'sk-ant-test' });
  client = new Anthropic({ baseURL: server.url, apiKey: 'sk-ant-test', maxRetries: 0 });
});
after(async () => server && (await server.stop()));

test('a message: system, text content, stop_reason and usage', async () => {
  const m = await client.messages.create({ model: 'tiny', system: 'You are terse.', max_tokens: 6, messages: [{ role: 'user', content: 'Hello' }] });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 6);
  assert.ok(m.usage.input_tokens > 5);
  // Content blocks and a system array read the same as strings.
  const blocks = await client.messages.create({ model: 'tiny', system: [{ type: 'text', text: 'You are terse.' }], max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }] });
  assert.equal(blocks.usage.input_tokens, m.usage.input_tokens);
});

test('streaming: Anthropic events, and the SDK assembles the same text', async () => {
  const stream = client.messages.stream({ model: 'tiny', max_tokens: 10, messages: [{ role: 'user', content: 'Tell me a story' }], stop_sequences: ['\n\n\n'] });
  const types = [];
  let text = '';
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.ok(types.includes('content_block_delta'));
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(final.content[0].text, text);
  // Sampled (Anthropic's default temperature is 1) from a random-weight model:
  // an end-of-text or '\n\n\n' token may end it early, as it may any client's.
  assert.ok(final.usage.output_tokens >= 1 && final.usage.output_tokens <= 10, String(final.usage.output_tokens));
  if (final.stop_reason === 'max_tokens') assert.equal(final.usage.output_tokens, 10);
  else assert.ok(['end_turn', 'stop_sequence'].includes(final.stop_reason), final.stop_reason);
});

test('a stop sequence ends the answer: stop_reason "stop_sequence" names it', async () => {
  // stories260K is trained: its greedy story is stable, so a word from it is sure to come.
  const ask = { model: 'stories260K', max_tokens: 32, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] };
  const free = await client.messages.create(ask);
  const text = free.content[0].text;
  const at = text.indexOf(' ', text.length >> 1);
  assert.ok(at > 0, text);
  const word = text.slice(at).split(' ').slice(0, 2).join(' ');
  const m = await client.messages.create({ ...ask, stop_sequences: ['zzz', word] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, word);
  assert.equal(m.content[0].text, text.slice(0, text.indexOf(word)));
});

test('a forced tool_use, non-streamed and streamed, then a tool_result turn', async () => {
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'lookup_order' }]) {
    const m = await client.messages.create({ model: 'tiny', max_tokens: 400, tools: [lookupOrder], tool_choice, messages: [{ role: 'user', content: 'Where is order 42?' }] });
    assert.equal(m.stop_reason, 'tool_use');
    // Exactly one tool_use block (parallel calls are off unless asked for).
    const uses = m.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1, JSON.stringify(m.content));
    const use = uses[0];
    assert.equal(use.name, 'lookup_order');
    assert.equal(typeof use.input, 'object');
    assert.ok(Number.isInteger(use.input.order_id));
  }
  const stream = client.messages.stream({ model: 'tiny', max_tokens: 400, tools: [lookupOrder], tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'Where is order 42?' }] });
  let partial = '';
  for await (const ev of stream) {
    if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') partial += ev.delta.partial_json;
  }
  const final = await stream.finalMessage();
  const streamedUses = final.content.filter((b) => b.type === 'tool_use');
  assert.equal(streamedUses.length, 1, JSON.stringify(final.content));
  const use = streamedUses[0];
  assert.deepEqual(use.input, JSON.parse(partial), 'the SDK parsed the streamed input_json_delta pieces');
  assert.ok(Number.isInteger(use.input.order_id));
  assert.equal(final.stop_reason, 'tool_use');

  const next = await client.messages.create({
    model: 'tiny',
    max_tokens: 4,
    tools: [lookupOrder],
    messages: [
      { role: 'user', content: 'Where is order 42?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: use.id, name: 'lookup_order', input: use.input }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"status": "shipped"}' }] },
    ],
  });
  assert.equal(next.type, 'message');
  assert.ok(next.usage.input_tokens > final.usage.input_tokens);
});

test('errors use Anthropic\'s envelope and status codes', async () => {
  await assert.rejects(client.messages.create({ model: 'nope', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }), (e) => e instanceof Anthropic.NotFoundError && e.error.type === 'error' && e.error.error.type === 'not_found_error');
  await assert.rejects(client.messages.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status === 400 && /max_tokens/.test(e.message));
  await assert.rejects(client.messages.create({ model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }), (e) => e.status === 400 && /image blocks are not supported/.test(e.message));
  const wrong = new Anthropic({ baseURL: server.url, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }), (e) => e instanceof Anthropic.AuthenticationError && e.error.error.type === 'authentication_error');
  // Bearer works too, as for the other APIs.
  const r = await post(server.url + '/v1/messages', { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }, { Authorization: 'Bearer sk-ant-test' });
  assert.equal(r.status, 200);
});

test('count_tokens: messages.countTokens gives the input_tokens /v1/messages bills for the same request', async () => {
  // stories260K (trained, no template: a plain transcript) and tiny (Qwen2's template, tools rendered in it).
  const asks = [
    { model: 'stories260K', system: 'You tell stories.', messages: [{ role: 'user', content: 'Once upon a time' }] },
    { model: 'stories260K', system: 'You tell stories.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Once upon a time' }, { type: 'text', text: ' there was a cat' }] }] },
    { model: 'tiny', system: 'You are terse.', tools: [lookupOrder], tool_choice: { type: 'auto' },
      messages: [{ role: 'user', content: 'Where is order 42?' }, { role: 'assistant', content: 'Let me' }] },
  ];
  const counts = [];
  for (const ask of asks) {
    const counted = await client.messages.countTokens(ask);
    const m = await client.messages.create({ ...ask, max_tokens: 1 });
    assert.equal(counted.input_tokens, m.usage.input_tokens, JSON.stringify(ask));
    counts.push(counted.input_tokens);
  }
  assert.ok(counts[1] > counts[0], `a longer prompt, more tokens: ${counts}`);
  // The tools are part of the prompt the template renders.
  const { tools, tool_choice, ...bare } = asks[2];
  assert.ok((await client.messages.countTokens(bare)).input_tokens < counts[2]);
});

test('count_tokens: the same key, field checks and error envelope as /v1/messages', async () => {
  const ask = { model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }] };
  const wrong = new Anthropic({ baseURL: server.url, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.countTokens(ask), (e) => e instanceof Anthropic.AuthenticationError);
  await assert.rejects(client.messages.countTokens({ ...ask, messages: [{ role: 'user', content: 42 }] }),
                       (e) => e instanceof Anthropic.BadRequestError && /'messages\[0\]\.content'/.test(e.error.error.message));
  await assert.rejects(client.messages.countTokens({ ...ask, model: 'nope' }), (e) => e instanceof Anthropic.NotFoundError);
  // Bearer too; and the answer is exactly Anthropic's shape.
  const r = await post(server.url + '/v1/messages/count_tokens', ask, { Authorization: 'Bearer sk-ant-test' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(Object.keys(r.json), ['input_tokens']);
  assert.ok(Number.isInteger(r.json.input_tokens) && r.json.input_tokens > 0);
});
