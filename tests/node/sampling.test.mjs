// Sampling parameters through HTTP, on each API that reads them, with the
// official clients. stories260K is trained, so its greedy story is stable and
// each parameter has a known effect on it:
// - a `seed` with temperature > 0 reproduces the same text, and the text is
//   not the greedy one (so the truncations below have something to change);
// - top_k 1, top_p 0 and min_p 1 each leave only the likeliest token: at
//   temperature 1 with that seed the text is exactly the greedy one; a codec
//   that drops the field samples the seeded, different text instead;
// - repeat, presence and frequency penalties each change the greedy text (the
//   story repeats its words); repeat_last_n 0 turns the repeat penalty off.
// Which fields each codec reads (src/api/*_codec.cc): OpenAI chat and
// completions and Ollama's options all of them; the Responses API
// temperature and top_p; Anthropic temperature, top_p and top_k (no seed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { modelsDir, startServer, post } from './helpers.mjs';

const model = 'stories260K';
const N = 32;
const PROMPT = 'Once upon a time';
const user = [{ role: 'user', content: PROMPT }];

let server, openai, anthropic, ollama;
before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '1', '--ctx', '512', '--threads', '1']);
  openai = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
  ollama = new Ollama({ host: server.url });
});
after(async () => server && (await server.stop()));

// Each API: a function from sampling fields to the answer's text.
const apis = {
  'OpenAI chat': async (s) => (await openai.chat.completions.create({ model, messages: user, max_tokens: N, ...s })).choices[0].message.content,
  'OpenAI completions': async (s) => (await openai.completions.create({ model, prompt: PROMPT, max_tokens: N, ...s })).choices[0].text,
  'Responses': async (s) => (await openai.responses.create({ model, input: PROMPT, max_output_tokens: N, ...s })).output_text,
  'Anthropic': async (s) => (await anthropic.messages.create({ model, messages: user, max_tokens: N, ...s })).content[0].text,
  'Ollama generate': async (s) => (await ollama.generate({ model, prompt: PROMPT, stream: false, options: { num_predict: N, ...s } })).response,
  'Ollama chat': async (s) => (await ollama.chat({ model, messages: user, stream: false, options: { num_predict: N, ...s } })).message.content,
};
const all = ['OpenAI chat', 'OpenAI completions', 'Ollama generate', 'Ollama chat'];
const reads = {
  seed: all,
  top_k: [...all, 'Anthropic'],
  top_p: [...all, 'Anthropic', 'Responses'],
  min_p: all,
  repeat_penalty: all,
  repeat_last_n: all,
  presence_penalty: all,
  frequency_penalty: all,
};
const supports = (api, field) => reads[field].includes(api);

test('a seed with temperature 1 reproduces the same text; another seed gives another, and neither is the greedy text', async () => {
  for (const api of reads.seed) {
    const gen = apis[api];
    const greedy = await gen({ temperature: 0 });
    const a = await gen({ temperature: 1, seed: 42 });
    const b = await gen({ temperature: 1, seed: 42 });
    const c = await gen({ temperature: 1, seed: 43 });
    assert.equal(b, a, `${api}: the same seed, the same text`);
    assert.notEqual(c, a, `${api}: seeds 42 and 43 gave the same text: ${a}`);
    assert.notEqual(a, greedy, `${api}: seed 42 at temperature 1 gave the greedy text`);
  }
});

test('top_k 1, top_p 0 and min_p 1 each make temperature 1 greedy', async () => {
  for (const [api, gen] of Object.entries(apis)) {
    const greedy = await gen({ temperature: 0 });
    assert.ok(greedy.length > 0, api);
    // Anthropic and the Responses API read no seed: their sampled text differs from
    // the greedy one anyway (the story branches within a few tokens at temperature 1).
    const base = supports(api, 'seed') ? { temperature: 1, seed: 42 } : { temperature: 1 };
    for (const [field, value] of [['top_k', 1], ['top_p', 0], ['min_p', 1]]) {
      if (!supports(api, field)) continue;
      assert.equal(await gen({ ...base, [field]: value }), greedy, `${api}: ${field} ${value} at temperature 1`);
    }
  }
});

test('repeat, presence and frequency penalties each change the greedy text; repeat_last_n 0 turns the repeat penalty off', async () => {
  for (const api of all) {
    const gen = apis[api];
    const greedy = await gen({ temperature: 0 });
    for (const field of ['repeat_penalty', 'presence_penalty', 'frequency_penalty']) {
      const text = await gen({ temperature: 0, [field]: 1.5 });
      assert.notEqual(text, greedy, `${api}: ${field} 1.5 left the greedy text unchanged`);
    }
    assert.equal(await gen({ temperature: 0, repeat_penalty: 1.5, repeat_last_n: 0 }), greedy, `${api}: repeat_last_n 0`);
  }
});

// --- Ollama's /api/generate fields ---

test('ollama generate: "system" is the system turn of the templated prompt', async () => {
  const ask = { model: 'tiny', prompt: 'Hello', stream: false, options: { num_predict: 8, temperature: 0 } };
  const system = 'You are a terse pirate.';
  const withSystem = await ollama.generate({ ...ask, system });
  const without = await ollama.generate(ask);
  const rendered = async (messages) => (await post(server.url + '/hone/render', { model: 'tiny', messages })).json.tokens;
  assert.equal(withSystem.prompt_eval_count, await rendered([{ role: 'system', content: system }, { role: 'user', content: 'Hello' }]));
  assert.equal(without.prompt_eval_count, await rendered([{ role: 'user', content: 'Hello' }]));
  assert.notEqual(withSystem.prompt_eval_count, without.prompt_eval_count);
  // The same answer as the chat with that system message.
  const chat = await ollama.chat({ model: 'tiny', stream: false, options: ask.options,
                                   messages: [{ role: 'system', content: system }, { role: 'user', content: 'Hello' }] });
  assert.equal(withSystem.response, chat.message.content);
});

test('ollama generate: "raw" sends the prompt as it is, without the template (and without "system")', async () => {
  const prompt = '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n';
  const options = { num_predict: 8, temperature: 0 };
  const raw = await ollama.generate({ model: 'tiny', prompt, raw: true, stream: false, options });
  // A completion's prompt is the caller's own template too: the same tokens, the same answer.
  const completion = await openai.completions.create({ model: 'tiny', prompt, max_tokens: 8, temperature: 0 });
  assert.equal(raw.prompt_eval_count, completion.usage.prompt_tokens);
  assert.equal(raw.response, completion.choices[0].text);
  // Templated, the same text is wrapped in a user turn: more tokens.
  const templated = await ollama.generate({ model: 'tiny', prompt, stream: false, options });
  assert.ok(templated.prompt_eval_count > raw.prompt_eval_count, `${templated.prompt_eval_count} vs ${raw.prompt_eval_count}`);
  // A system prompt is part of the template, so raw ignores it, as Ollama does.
  const rawSystem = await ollama.generate({ model: 'tiny', prompt, raw: true, system: 'You are a pirate.', stream: false, options });
  assert.equal(rawSystem.prompt_eval_count, raw.prompt_eval_count);
  assert.equal(rawSystem.response, raw.response);
});
