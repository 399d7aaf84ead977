// Tool calling through the official `openai` and `ollama` clients against a
// real `hone serve` with the synthetic Qwen2.5 (real tokenizer and
// Qwen2.5-Instruct template, random weights). Random weights say nothing
// useful, so these tests check what must hold whatever the weights: a forced
// call always parses and matches its schema; history with calls and results
// renders in the model's own format, exactly as llama.cpp renders it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { modelsDir, startServer, post, sleep, skipOrFail } from './helpers.mjs';

const lookupOrder = {
  type: 'function',
  function: {
    name: 'lookup_order',
    description: 'Look up an order by its number',
    parameters: {
      type: 'object',
      // Bounded strings: a random-weight model rarely closes an open one.
      properties: { order_id: { type: 'integer' }, email: { type: 'string', maxLength: 40 } },
      required: ['order_id'],
    },
  },
};
const refund = {
  type: 'function',
  function: {
    name: 'refund',
    description: 'Refund part of an order',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'integer' }, amount: { type: 'number' }, reason: { type: 'string', maxLength: 40 } },
      required: ['order_id', 'amount'],
    },
  },
};
const history = [
  { role: 'system', content: 'You are the support assistant of a shop.' },
  { role: 'user', content: 'Where is order 42?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup_order', arguments: '{"order_id": 42}' } }],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '{"status": "shipped"}' },
];

let server, client;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '2', '--ctx', '2048']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => server && (await server.stop()));

function checkArgs(args, required, types) {
  const parsed = JSON.parse(args); // a forced call's arguments always parse
  for (const k of required) assert.ok(k in parsed, `missing required argument ${k} in ${args}`);
  for (const [k, v] of Object.entries(parsed)) {
    assert.ok(k in types, `unexpected argument ${k}`);
    if (types[k] === 'integer') assert.ok(Number.isInteger(v), `${k} = ${v} is not an integer`);
    else assert.equal(typeof v, types[k], `${k} = ${JSON.stringify(v)}`);
  }
  return parsed;
}

test('tool_choice "required" returns a call whose arguments match the schema', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: 'tiny',
      messages: history.slice(0, 2),
      tools: [lookupOrder],
      tool_choice: 'required',
      max_tokens: 400,
      seed,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_/);
    assert.equal(call.function.name, 'lookup_order');
    checkArgs(call.function.arguments, ['order_id'], { order_id: 'integer', email: 'string' });
  }
});

test('a named tool_choice calls that function and no other', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny',
    messages: [{ role: 'user', content: 'Refund half of order 7, it arrived broken.' }],
    tools: [lookupOrder, refund],
    tool_choice: { type: 'function', function: { name: 'refund' } },
    max_tokens: 400,
    seed: 5,
  });
  // Exactly one call (parallel_tool_calls is off), of the named function, and no text.
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(r.choices[0].message.content, null);
  assert.equal(r.choices[0].message.tool_calls.length, 1, JSON.stringify(r.choices[0].message.tool_calls));
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'refund');
  checkArgs(call.function.arguments, ['order_id', 'amount'], { order_id: 'integer', amount: 'number', reason: 'string' });
});

test('streamed calls arrive as OpenAI deltas and reassemble into valid arguments', async () => {
  const stream = await client.chat.completions.create({
    model: 'tiny',
    messages: history.slice(0, 2),
    tools: [lookupOrder, refund],
    tool_choice: { type: 'function', function: { name: 'lookup_order' } },
    max_tokens: 400,
    seed: 9,
    stream: true,
  });
  let id = '', name = '', args = '', finish = null, pieces = 0, ids = 0;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const t of c.delta.tool_calls ?? []) {
      assert.equal(t.index, 0);
      if (t.id) {
        assert.equal(id, '', 'the id comes once, with the first piece');
        id = t.id;
        ++ids;
        assert.equal(t.type, 'function');
      }
      if (t.function?.name) name += t.function.name;
      args += t.function?.arguments ?? '';
      ++pieces;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.match(id, /^call_/);
  assert.equal(ids, 1, 'exactly one call');
  assert.equal(name, 'lookup_order');
  assert.ok(pieces > 1, 'the arguments stream in pieces');
  assert.equal(finish, 'tool_calls');
  checkArgs(args, ['order_id'], { order_id: 'integer', email: 'string' });
});

test('tool_choice "none" and a model without tools support', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny',
    messages: history.slice(0, 2),
    tools: [lookupOrder],
    tool_choice: 'none',
    max_tokens: 8,
  });
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  // stories260K has no chat template, so no tool format.
  const bad = await post(server.url + '/v1/chat/completions', {
    model: 'stories260K',
    messages: [{ role: 'user', content: 'hi' }],
    tools: [lookupOrder],
    tool_choice: 'required',
  });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /no chat template.*tools/);
});

test('bad tool definitions and choices are 400s that name the field', async () => {
  const cases = [
    [{ tools: [{ type: 'function', function: { description: 'x' } }] }, /tools\[0\].*name/],
    [{ tools: [{ type: 'function', function: { name: 'a b' } }] }, /tools\[0\].*name/],
    [{ tools: [{ type: 'retrieval' }] }, /tools\[0\]\.type/],
    [{ tools: [lookupOrder, lookupOrder] }, /two tools are named 'lookup_order'/],
    [{ tools: [lookupOrder], tool_choice: { type: 'function', function: { name: 'nope' } } }, /'nope'.*not in 'tools'/],
    [{ tool_choice: 'required' }, /no 'tools'/],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, /parameters.*schema object/],
    [{ tools: Array.from({ length: 129 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } })) }, /at most 128/],
  ];
  for (const [extra, re] of cases) {
    const r = await post(server.url + '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], ...extra });
    assert.equal(r.status, 400, JSON.stringify(extra).slice(0, 80));
    assert.match(r.json.error.message, re);
  }
});

test('hostile tool lists and bodies are 400s, never a crash or a stall', async () => {
  const deep = '{"a":'.repeat(100) + '1' + '}'.repeat(100);
  const keys = '{' + Array.from({ length: 2000 }, (_, i) => `"k${i}":0`).join(',') + '}';
  const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${i}`, {}])) };
  const raw = (extra) => `{"model":"tiny","messages":[{"role":"user","content":"hi"}],${extra}}`;
  const cases = [
    [raw(`"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]`), /nests deeper than 64/],
    [raw(`"tools":[{"type":"function","function":{"name":"f","parameters":${keys}}}]`), /more than 1024 keys/],
    [JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f', parameters: wide } }] }), /more than 100 properties/],
    [raw(`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":1}`), /tool_choice/],
    [raw(`"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":${deep}}}]}]`), /nests deeper/],
  ];
  for (const [body, re] of cases) {
    const r = await post(server.url + '/v1/chat/completions', body);
    assert.equal(r.status, 400, r.text.slice(0, 200));
    assert.match(r.json.error.message, re);
  }
  // Wrongly typed optional fields read as absent, never a 500.
  const odd = await post(server.url + '/v1/messages', { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x', is_error: 'yes' }] }] });
  assert.equal(odd.status, 200, odd.text);
  // A null cap is no cap: a schema that admits only a boolean ends the answer
  // (json_object would let a random-weight model fill the context: 2 minutes).
  const nullMax = await post(server.url + '/v1/responses', { model: 'tiny', input: 'hi', max_output_tokens: null, temperature: 0,
                                                             text: { format: { type: 'json_schema', name: 'b', schema: { type: 'boolean' } } } });
  assert.equal(nullMax.status, 200, nullMax.text);
  const said = nullMax.json.output.flatMap((o) => o.content || []).map((c) => c.text).join('');
  assert.match(said.trim(), /^(true|false)$/, nullMax.text);
  assert.equal(nullMax.json.status, 'completed', nullMax.text);
  assert.equal((await fetch(server.url + '/health')).status, 200);
});

test('a tool result turn renders in the model\'s own format', async () => {
  const r = await post(server.url + '/hone/render', { model: 'tiny', messages: history, tools: [lookupOrder] });
  assert.equal(r.status, 200, r.text);
  const p = r.json.prompt;
  // Qwen2.5's format: the tool list in the system turn, the call in <tool_call>, the result in <tool_response>.
  assert.match(p, /^<\|im_start\|>system\nYou are the support assistant of a shop\.\n\n# Tools\n/);
  assert.ok(p.includes('"name": "lookup_order"'), p);
  assert.ok(p.includes('<|im_start|>assistant\n<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": 42}}\n</tool_call><|im_end|>'), p);
  assert.ok(p.includes('<|im_start|>user\n<tool_response>\n{"status": "shipped"}\n</tool_response><|im_end|>'), p);
  assert.ok(p.endsWith('<|im_start|>assistant\n'), p);
  assert.equal(r.json.grammar_lazy, true, 'auto: the grammar waits for <tool_call>');
  // And the conversation is served.
  const c = await client.chat.completions.create({ model: 'tiny', messages: history, tools: [lookupOrder], max_tokens: 8 });
  assert.ok(c.usage.prompt_tokens > 100);
});

// --- llama.cpp's own rendering, from the peer llama-server of the same tree ---

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

test('the rendering matches llama-server --jinja /apply-template', async (t) => {
  const bin = path.join(process.env.HONE_PEER_BIN_DIR || '', 'llama-server');
  if (!process.env.HONE_PEER_BIN_DIR || !fs.existsSync(bin)) return skipOrFail(t, `no llama-server peer: HONE_PEER_BIN_DIR=${process.env.HONE_PEER_BIN_DIR ?? ''} has no llama-server`);
  const port = await freePort();
  const peer = spawn(bin, ['-m', path.join(modelsDir(), 'tiny.gguf'), '--jinja', '--host', '127.0.0.1', '--port', String(port), '-c', '2048', '-t', '2', '-np', '1'], { stdio: 'ignore' });
  try {
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 200; ++i) {
      try {
        if ((await fetch(url + '/health')).ok) break;
      } catch {}
      await sleep(100);
    }
    const conversations = [
      { messages: history, tools: [lookupOrder, refund] },
      { messages: history.slice(0, 2), tools: [lookupOrder] },
      { messages: [{ role: 'system', content: '你是客服。' }, { role: 'user', content: '我的订单在哪里？' }] },
    ];
    for (const body of conversations) {
      const theirs = await post(url + '/apply-template', body);
      assert.equal(theirs.status, 200, theirs.text);
      const ours = await post(server.url + '/hone/render', { model: 'tiny', ...body });
      assert.equal(ours.status, 200, ours.text);
      assert.equal(ours.json.prompt, theirs.json.prompt);
    }
  } finally {
    peer.kill('SIGKILL');
  }
});

// --- Ollama's /api/chat ---

test('ollama: tools, message.tool_calls with object arguments, and tool history', async () => {
  const ollama = new Ollama({ host: server.url });
  const base = { model: 'tiny', tools: [lookupOrder], options: { num_predict: 400, seed: 3 } };
  // Ollama has no tool_choice; hone reads OpenAI's as an extension, which forces the call here.
  const r = await ollama.chat({ ...base, tool_choice: 'required', messages: history.slice(0, 2) });
  assert.equal(r.done, true);
  assert.equal(r.done_reason, 'stop');
  const calls = r.message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'lookup_order');
  assert.equal(typeof calls[0].function.arguments, 'object', 'Ollama returns arguments as an object');
  checkArgs(JSON.stringify(calls[0].function.arguments), ['order_id'], { order_id: 'integer', email: 'string' });

  // Streamed: the call comes whole, in one message of its own.
  let streamed = [];
  for await (const part of await ollama.chat({ ...base, tool_choice: 'required', messages: history.slice(0, 2), stream: true })) {
    streamed.push(...(part.message.tool_calls ?? []));
  }
  assert.equal(streamed.length, 1);
  assert.equal(typeof streamed[0].function.arguments.order_id, 'number');

  // History in Ollama's shape: arguments as an object, the result as role "tool".
  const ollamaHistory = [
    history[0],
    history[1],
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'lookup_order', arguments: { order_id: 42 } } }] },
    { role: 'tool', tool_name: 'lookup_order', content: '{"status": "shipped"}' },
  ];
  const h = await ollama.chat({ ...base, messages: ollamaHistory, options: { num_predict: 4 } });
  assert.equal(h.done, true);
  assert.ok(h.prompt_eval_count > 100);
  const rendered = await post(server.url + '/hone/render', { model: 'tiny', messages: ollamaHistory, tools: [lookupOrder] });
  assert.ok(rendered.json.prompt.includes('{"name": "lookup_order", "arguments": {"order_id": 42}}'));
});
