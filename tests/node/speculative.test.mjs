// Speculative decoding (--spec, serve/scheduler_spec.cc): the output is the
// output without it, token for token, for greedy and seeded sampling, beside
// a grammar-constrained request and a forced tool call in the same batch; drafts are made and kept
// on the trained TinyStories model; a stream cancelled mid-draft leaves the
// slot clean; an unknown mode is refused at start. With a draft model
// (per model in the config file, by registry name): the same output, drafts
// made for both slots and kept; a draft model with another vocabulary fails
// that model's load with the reason, and the server goes on serving. With the
// defaults, ngram-mod drafts a repeated answer it was shown.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startServer, modelsDir, post, metric, sleep, HONE } from './helpers.mjs';

let plain, spec, drafted, dir;
before(async () => {
  // The trained TinyStories models (real text, so drafts can be right) and the synthetic `tiny` (a chat template).
  dir = path.join(path.dirname(modelsDir()), 'spec-models');
  fs.mkdirSync(dir, { recursive: true });
  const shared = path.dirname(fs.realpathSync(path.join(modelsDir(), 'stories260K.gguf')));
  for (const f of ['tinystories-d256-l4-f32.gguf', 'stories260K.gguf']) {
    const link = path.join(dir, f);
    if (!fs.existsSync(link)) fs.symlinkSync(path.join(shared, f), link);
  }
  // `tiny` twice: `tiny-ngram` drafts with ngram-mod in the config below.
  for (const name of ['tiny.gguf', 'tiny-ngram.gguf']) {
    const link = path.join(dir, name);
    if (!fs.existsSync(link)) fs.symlinkSync(path.join(modelsDir(), 'tiny.gguf'), link);
  }
  // Token identity holds where every verification batch runs the row-by-row
  // attention kernel: flash attention on (hone's auto is off) and fewer than
  // 64 query rows in a pass (its tiled kernel takes 64 and more). With plain
  // attention, or longer drafts, attention over k+1 rows rounds differently
  // from k+1 single steps and greedy text can drift (docs/serve.md).
  const common = ['--models', dir, '--slots', '2', '--cache-ram', '0', '--cache-disk', '0', '--flash-attn', 'on', '--spec-max', '48'];
  plain = await startServer(common);
  // --spec-min-gain 0: always draft, so each test exercises drafts (on this
  // tiny model drafting does not pay, and would otherwise pause).
  spec = await startServer([...common, '--spec', 'ngram-simple', '--spec-ngram', '3', '--spec-min-gain', '0', '--kv-unified', 'on']);
  // The TinyStories model drafts with stories260K (same 512-piece vocabulary);
  // `tiny` (Qwen's vocabulary) is given the same draft model, which cannot fit it.
  const config = path.join(dir, 'draft.toml');
  fs.writeFileSync(config, '[model_options.tinystories-d256-l4-f32]\nspec = "draft-simple"\ndraft = "stories260K"\n' +
                           '[model_options.tiny]\nspec = "draft-simple"\ndraft = "stories260K"\n' +
                           // ngram-mod: random weights fall into one-token loops, which ngram-simple never drafts
                           // (its latest match is too close to copy from); ngram-mod does.
                           '[model_options.tiny-ngram]\nspec = "ngram-mod"\n');
  drafted = await startServer([...common, '--config', config, '--spec-min-gain', '0']);
});
after(async () => {
  await plain?.stop();
  await spec?.stop();
  await drafted?.stop();
});

const STORY = 'TinyStories-d256';
const prompts = [
  // Copy-heavy: the answer restates what the prompt holds.
  'Lily said, "I like the big red ball." Max said, "I like the big red ball." Tom said, "I like the big red ball." Ben said,',
  'Once upon a time, there was a little boy named Tim. Tim had a big red ball. He liked to play with his ball every day. One day,',
  'The sun was hot. The cat sat in the shade of the tree. The dog sat in the shade of the tree. The bird',
];

async function complete(server, body) {
  const r = await post(server.url + '/v1/completions', { model: 'tinystories-d256-l4-f32', max_tokens: 120, ...body });
  assert.equal(r.status, 200, r.text);
  return r.json.choices[0].text;
}

test('greedy output is token-identical with and without speculation, and drafts are kept', async () => {
  for (const prompt of prompts) {
    const a = await complete(plain, { prompt, temperature: 0 });
    const b = await complete(spec, { prompt, temperature: 0 });
    assert.equal(b, a, `${STORY}: ${JSON.stringify(prompt.slice(0, 40))}`);
  }
  const drafted = await metric(spec.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32');
  const kept = await metric(spec.url, 'hone_spec_accepted_tokens_total', 'tinystories-d256-l4-f32');
  assert.ok(drafted > 0, 'no token was drafted');
  assert.ok(kept > 0 && kept <= drafted, `${kept} of ${drafted} drafts kept`);
  assert.equal(await metric(plain.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32'), null);
  // The request log line says how many drafts each answer kept.
  const line = JSON.parse((await spec.waitLog(/^\{.*"draft_tokens".*\}$/m))[0]);
  assert.ok(line.draft_tokens > 0 && line.accepted_tokens <= line.draft_tokens, JSON.stringify(line));
});

test('seeded sampling gives the same text with and without speculation', async () => {
  for (const seed of [1, 42]) {
    const body = { prompt: prompts[0], temperature: 0.8, top_k: 40, seed };
    assert.equal(await complete(spec, body), await complete(plain, body), `seed ${seed}`);
  }
});

test('a schema-constrained generation beside a drafting one, in the same batch: both as without speculation', async () => {
  // Both on the TinyStories model (one scheduler, 2 slots): the JSON one
  // through Ollama's format (a grammar), the other a plain completion.
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } },
                   required: ['name', 'age'] };
  const run = async (server) => {
    const before = await metric(server.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32') ?? 0;
    const [json, story] = await Promise.all([
      post(server.url + '/api/generate', { model: 'tinystories-d256-l4-f32', prompt: prompts[1], raw: true, stream: false,
                                           format: schema, options: { temperature: 0, num_predict: 60 } }),
      complete(server, { prompt: prompts[0], temperature: 0, max_tokens: 200 }),
    ]);
    const after = await metric(server.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32') ?? 0;
    return { json, story, drafted: after - before };
  };
  const a = await run(plain);
  const b = await run(spec);
  assert.equal(b.json.status, 200, b.json.text);
  assert.ok(b.drafted > 0, 'nothing was drafted while the grammar ran');
  const obj = JSON.parse(b.json.json.response);
  assert.equal(typeof obj.name, 'string');
  assert.equal(b.json.json.response, a.json.json.response);
  assert.equal(b.story, a.story);
});

test('a forced tool call beside a drafting request, in the same batch: both as without speculation', async () => {
  // On `tiny-ngram` (the synthetic Qwen2.5: its chat template renders tools;
  // random weights repeat themselves, so ngram-mod finds drafts), with the
  // config's per-model spec. The tool call is grammar-constrained to its
  // schema; the other is a plain completion.
  const tool = {
    type: 'function',
    function: { name: 'lookup_order', description: 'Look up an order by its number',
                parameters: { type: 'object', properties: { order_id: { type: 'integer' } }, required: ['order_id'] } },
  };
  const run = async (server) => {
    const before = await metric(server.url, 'hone_spec_draft_tokens_total', 'tiny-ngram') ?? 0;
    const [call, text] = await Promise.all([
      post(server.url + '/v1/chat/completions', {
        model: 'tiny-ngram', messages: [{ role: 'user', content: 'Where is order 42?' }], tools: [tool],
        tool_choice: 'required', temperature: 0, max_tokens: 60 }),
      post(server.url + '/v1/completions', { model: 'tiny-ngram', prompt: 'order 42 order 42 order 42 order 42 order',
                                             temperature: 0, max_tokens: 120 }),
    ]);
    const after = await metric(server.url, 'hone_spec_draft_tokens_total', 'tiny-ngram') ?? 0;
    assert.equal(call.status, 200, call.text);
    assert.equal(text.status, 200, text.text);
    return { call: call.json.choices[0].message.tool_calls, text: text.json.choices[0].text, drafted: after - before };
  };
  const a = await run(plain);
  const b = await run(drafted);
  assert.ok(b.drafted > 0, 'nothing was drafted beside the tool call');
  assert.equal(b.call.length >= 1, true, JSON.stringify(b.call));
  assert.equal(b.call[0].function.name, 'lookup_order');
  assert.equal(typeof JSON.parse(b.call[0].function.arguments).order_id, 'number');
  assert.deepEqual(b.call.map((c) => c.function), a.call.map((c) => c.function));
  assert.equal(b.text, a.text);
});

test('a stream cancelled mid-draft frees its slot and the next answer is unchanged', async () => {
  const ctl = new AbortController();
  const res = await fetch(spec.url + '/v1/completions', {
    method: 'POST', signal: ctl.signal, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'tinystories-d256-l4-f32', prompt: prompts[0], max_tokens: 2000, temperature: 0,
                           stream: true, ignore_eos: true }),
  });
  const reader = res.body.getReader();
  await reader.read();
  await reader.read();
  ctl.abort();
  let running = null;
  for (let i = 0; i < 100 && running !== 0; ++i) {
    running = await metric(spec.url, 'hone_num_requests_running', 'tinystories-d256-l4-f32');
    if (running !== 0) await sleep(50);
  }
  assert.equal(running, 0, 'the cancelled stream still holds its slot');
  const body = { prompt: prompts[1], temperature: 0 };
  assert.equal(await complete(spec, body), await complete(plain, body));
});

test('an unknown --spec mode is refused at start, naming the modes', () => {
  const r = spawnSync(HONE, ['serve', '--models', dir, '--port', '0', '--spec', 'ngram-magic'], { encoding: 'utf8', timeout: 20000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /unknown speculation mode 'ngram-magic' \(none, auto, or one of: ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, draft-simple\)/);
  const d = spawnSync(HONE, ['serve', '--models', dir, '--port', '0', '--spec', 'draft-simple'], { encoding: 'utf8', timeout: 20000 });
  assert.equal(d.status, 2, d.stderr);
  assert.match(d.stderr, /draft-simple needs a draft model \(--draft MODEL\)/);
});

// `spec` above drafts with its slots in one KV stream (--kv-unified on);
// `plain` and `drafted` keep one per slot (auto): the identity tests compare
// the two layouts too.
test('a --kv-unified value other than auto, on or off is refused at start, naming them', () => {
  const r = spawnSync(HONE, ['serve', '--models', dir, '--port', '0', '--kv-unified', 'yes'], { encoding: 'utf8', timeout: 20000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /kv-unified must be auto, on or off, not yes/);
});

test('a draft model: the same greedy and seeded output, drafts made for two slots at once and kept', async () => {
  const two = async (server, body) => Promise.all(prompts.slice(0, 2).map((prompt) => complete(server, { prompt, ...body })));
  assert.deepEqual(await two(drafted, { temperature: 0 }), await two(plain, { temperature: 0 }));
  const seeded = { temperature: 0.8, top_k: 40, seed: 7 };
  assert.deepEqual(await two(drafted, seeded), await two(plain, seeded));
  const made = await metric(drafted.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32');
  const kept = await metric(drafted.url, 'hone_spec_accepted_tokens_total', 'tinystories-d256-l4-f32');
  assert.ok(made > 0 && kept > 0 && kept <= made, `${kept} of ${made} drafts kept`);
});

test('drafting that does not pay is paused: a draft model as slow as its target drafts for only a few steps', async () => {
  // The default --spec-min-gain (0.97): stories260K costs about as much per
  // token as this tiny target, so drafting measures slower than plain decoding
  // within its first steps and pauses (256 steps, then longer). Without the
  // pause a draft is made on nearly every step: more drafts than tokens.
  const config = path.join(dir, 'draft-paused.toml');
  fs.writeFileSync(config, '[model_options.tinystories-d256-l4-f32]\nspec = "draft-simple"\ndraft = "stories260K"\n');
  const server = await startServer(['--models', dir, '--slots', '1', '--cache-ram', '0', '--cache-disk', '0', '--config', config]);
  try {
    let tokens = 0;
    for (let i = 0; i < 6; ++i) {
      const r = await post(server.url + '/v1/completions', { model: 'tinystories-d256-l4-f32', prompt: prompts[i % prompts.length],
                                                             max_tokens: 200, temperature: 0, ignore_eos: true });
      assert.equal(r.status, 200, r.text);
      tokens += r.json.usage.completion_tokens;
    }
    const made = await metric(server.url, 'hone_spec_draft_tokens_total', 'tinystories-d256-l4-f32') ?? 0;
    assert.ok(made > 0, 'the draft model never drafted');
    assert.ok(made < tokens / 4, `${made} drafts for ${tokens} tokens: drafting was not paused`);
  } finally {
    await server.stop();
  }
});

test('ngram-mod learns an answer it was shown: the same request again drafts most of it, with the default cost model', async () => {
  // Defaults (flash attention off, --spec-min-gain 0.97, the cost model on):
  // ngram-mod's pool holds the first answer, and the second drafts it and
  // keeps it. Before this session its pool was cleared again and again: trimmed
  // drafts kept whole were reported as small shares of its own proposal.
  const server = await startServer(['--models', dir, '--slots', '1', '--cache-ram', '0', '--cache-disk', '0', '--spec', 'ngram-mod']);
  try {
    const body = { model: 'tinystories-d256-l4-f32', prompt: prompts[1], max_tokens: 160, temperature: 0, ignore_eos: true };
    const kept = () => metric(server.url, 'hone_spec_accepted_tokens_total', 'tinystories-d256-l4-f32').then((v) => v ?? 0);
    const first = await post(server.url + '/v1/completions', body);
    assert.equal(first.status, 200, first.text);
    const before = await kept();
    const second = await post(server.url + '/v1/completions', body);
    assert.equal(second.status, 200, second.text);
    const again = (await kept()) - before;
    assert.ok(again >= 80, `the repeated answer kept only ${again} drafted tokens of 160`);
  } finally {
    await server.stop();
  }
});

test('a draft model with another vocabulary fails that model\'s load with the reason; others still answer', async () => {
  const r = await post(drafted.url + '/v1/completions', { model: 'tiny', prompt: 'hello', max_tokens: 4 });
  assert.ok(r.status >= 400 && r.status < 600, `status ${r.status}`);
  assert.match(r.text, /cannot draft for .*tiny\.gguf: the vocabularies have 151\d+ and 512 tokens|cannot draft for .*tiny\.gguf: /);
  assert.equal((await post(drafted.url + '/v1/completions', { model: 'tinystories-d256-l4-f32', prompt: 'Once', max_tokens: 4 })).status, 200);
});
