// OpenAI's Responses API (/v1/responses) through the official `openai`
// client against a real `hone serve` (synthetic Qwen2.5, random weights).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { modelsDir, startServer, post } from './helpers.mjs';

const lookupOrder = {
  type: 'function',
  name: 'lookup_order',
  description: 'Look up an order by its number',
  parameters: {
    type: 'object',
    properties: { order_id: { type: 'integer' }, email: { type: 'string', maxLength: 40 } },
    required: ['order_id'],
  },
};

let server, client;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '2', '--ctx', '2048']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => server && (await server.stop()));

test('a response with instructions, output_text and usage', async () => {
  const r = await client.responses.create({ model: 'tiny', instructions: 'Be brief.', input: 'Hello there', max_output_tokens: 6 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(typeof r.output_text, 'string');
  assert.ok(r.output_text.length > 0);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.equal(r.usage.output_tokens, 6);
  assert.ok(r.usage.input_tokens > 5);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.instructions, 'Be brief.');
  // The instructions became the system turn.
  const rendered = await post(server.url + '/hone/render', { model: 'tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }] });
  assert.equal(r.usage.input_tokens, rendered.json.tokens);
});

test('a streamed response: Responses events in order, text equal to the final output_text', async () => {
  const stream = await client.responses.create({ model: 'tiny', input: [{ role: 'user', content: 'Tell me a story' }], max_output_tokens: 12, stream: true });
  const types = [];
  let text = '', last = -1, final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    assert.ok(ev.sequence_number > last, 'sequence numbers increase');
    last = ev.sequence_number;
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  assert.deepEqual(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.ok(types.includes('response.output_text.done'));
  assert.ok(types.includes('response.output_item.done'));
  assert.equal(types.at(-1), 'response.incomplete');
  assert.equal(final.output[0].content[0].text, text);
  assert.equal(final.usage.output_tokens, 12);
  // The SDK's own stream helper reads the same events.
  const helper = client.responses.stream({ model: 'tiny', input: 'Hi', max_output_tokens: 5 });
  const done = await helper.finalResponse();
  assert.equal(typeof done.output_text, 'string');
  assert.equal(done.usage.output_tokens, 5);
});

test('function tools: a forced call, streamed and not, and its result as the next input', async () => {
  const r = await client.responses.create({ model: 'tiny', input: 'Where is order 42?', tools: [lookupOrder], tool_choice: 'required', max_output_tokens: 400 });
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  const call = calls[0];
  assert.equal(call.name, 'lookup_order');
  assert.match(call.call_id, /^call_/);
  assert.ok(Number.isInteger(JSON.parse(call.arguments).order_id));
  assert.equal(r.status, 'completed');

  const stream = await client.responses.create({ model: 'tiny', input: 'Where is order 42?', tools: [lookupOrder], tool_choice: { type: 'function', name: 'lookup_order' }, max_output_tokens: 400, stream: true });
  let args = '', done = null, added = 0;
  for await (const ev of stream) {
    if (ev.type === 'response.output_item.added' && ev.item.type === 'function_call') ++added;
    if (ev.type === 'response.function_call_arguments.delta') args += ev.delta;
    if (ev.type === 'response.function_call_arguments.done') done = ev.arguments;
  }
  assert.equal(added, 1, 'a named tool_choice: exactly one call');
  assert.equal(args, done);
  assert.ok(Number.isInteger(JSON.parse(args).order_id));

  const next = await client.responses.create({
    model: 'tiny',
    input: [
      { role: 'user', content: 'Where is order 42?' },
      { type: 'function_call', call_id: call.call_id, name: 'lookup_order', arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: '{"status": "shipped"}' },
    ],
    tools: [lookupOrder],
    max_output_tokens: 4,
  });
  assert.ok(next.usage.input_tokens > r.usage.input_tokens, 'the call and its result are in the prompt');
});

test('text.format json_schema constrains output_text', async () => {
  const r = await client.responses.create({
    model: 'tiny',
    input: 'Give me a status',
    max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'status', schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } },
  });
  assert.equal(typeof JSON.parse(r.output_text).ok, 'boolean');
});

test('previous_response_id and unsupported items are clear 400s', async () => {
  await assert.rejects(client.responses.create({ model: 'tiny', input: 'x', previous_response_id: 'resp_1' }), (e) => e.status === 400 && /stores no responses/.test(e.message));
  await assert.rejects(client.responses.create({ model: 'tiny', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }), (e) => e.status === 400 && /input_image/.test(e.message));
  await assert.rejects(client.responses.create({ model: 'tiny', input: 'x', tools: [{ type: 'web_search' }] }), (e) => e.status === 400 && /only function tools/.test(e.message));
  await assert.rejects(client.responses.create({ model: 'nope', input: 'x' }), (e) => e.status === 404);
});
