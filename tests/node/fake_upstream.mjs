// A scriptable OpenAI-compatible upstream on loopback, for the router's fault
// matrix and the overflow benchmark. It streams chat completions as the
// OpenAI API does (SSE chunks, a usage chunk, [DONE]) at a set speed using
// timers only (no CPU), and on command:
//   - answers a status (5xx, 429 with Retry-After, 401 for chosen keys),
//   - delays the first byte, hangs, or drops a stream after N chunks,
//   - logs every request it saw with its key, hone's ledger id (X-Hone-Request-Id),
//     the usage it billed, whether it completed and whether the client left.
// POST .../embeddings answers [1, 0, 0] for each input (after ttft_ms; or `status`).
// Control: POST /__script {default: Behaviour, queue: [Behaviour...]} (the
// queue is used one per request first), GET /__log, POST /__reset.
// Behaviour: {status, retry_after, ttft_ms, tokens_per_s, tokens, drop_after,
//             hang, text, bad_keys: [..], limited_keys: [..], no_usage (report no usage),
//             tool_call: {name, arguments, index} (answer with that call, as OpenAI
//             streams one; index: the call's number on the wire, 0 unless set),
//             limit_share (a 429 storm: answer this share of chat requests 429
//             with Retry-After `retry_after`, after ttft_ms as a real upstream
//             takes time to answer; drawn from `seed`, so a run can be replayed)}
// Each log entry has `time` (the request arrived) and `answered` (its status went out).
// Start: `node fake_upstream.mjs [port]` prints {"port": N} on stdout.
import http from 'node:http';

const DEFAULT = { ttft_ms: 20, tokens_per_s: 500, tokens: 16 };

// A small seeded generator (mulberry32): the storm's draws repeat with its seed.
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function startFakeUpstream(port = 0) {
  let script = { default: { ...DEFAULT }, queue: [] };
  let draw = Math.random;
  let log = [];
  let seq = 0;

  const words = (b, n) => {
    const base = (b.text || 'the cloud answers in plain words').split(' ');
    return Array.from({ length: n }, (_, i) => base[i % base.length] + (i + 1 < n ? ' ' : ''));
  };

  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const key = (req.headers.authorization || '').replace(/^Bearer /, '');
    if (req.url === '/__script') {
      const s = JSON.parse(body || '{}');
      script = { default: { ...DEFAULT, ...(s.default || {}) }, queue: s.queue || [] };
      draw = script.default.seed !== undefined ? seeded(script.default.seed) : Math.random;
      return res.end('{}');
    }
    if (req.url === '/__log') return res.end(JSON.stringify(log));
    if (req.url === '/__reset') {
      log = [];
      script = { default: { ...DEFAULT }, queue: [] };
      return res.end('{}');
    }
    const entry = { id: ++seq, method: req.method, path: req.url, key, time: Date.now(), disconnected: false,
                    hone_id: req.headers['x-hone-request-id'] || null };
    log.push(entry);
    if (req.method === 'GET' && req.url.endsWith('/models')) {
      res.setHeader('Content-Type', 'application/json');
      return res.end(JSON.stringify({ object: 'list', data: [{ id: 'cloud-model', object: 'model' }] }));
    }
    const embeddings = req.method === 'POST' && req.url.endsWith('/embeddings');
    if (!embeddings && (req.method !== 'POST' || !req.url.endsWith('/chat/completions'))) {
      res.statusCode = 404;
      return res.end('{"error":{"message":"not found"}}');
    }
    const b = { ...script.default, ...(script.queue.shift() || {}) };
    let request = {};
    try {
      request = JSON.parse(body);
    } catch {
      res.statusCode = 400;
      return res.end('{"error":{"message":"bad json"}}');
    }
    if (embeddings) {
      // Vectors of 3 dimensions, [1, 0, 0] each: unlike any local model's.
      const inputs = Array.isArray(request.input) ? request.input : [request.input];
      entry.model = request.model;
      entry.inputs = inputs;
      entry.status = b.status || 200;
      res.setHeader('Content-Type', 'application/json');
      if (entry.status !== 200) {
        res.statusCode = entry.status;
        return res.end(JSON.stringify({ error: { message: `scripted ${entry.status}`, type: 'scripted' } }));
      }
      if (b.ttft_ms >= 1) await new Promise((r) => setTimeout(r, b.ttft_ms));
      const data = inputs.map((_, index) => ({ object: 'embedding', index, embedding: [1, 0, 0] }));
      return res.end(JSON.stringify({ object: 'list', model: request.model, data,
                                      usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } }));
    }
    entry.model = request.model;
    entry.stream = !!request.stream;
    entry.messages = request.messages;
    entry.max_tokens = request.max_tokens ?? request.max_completion_tokens;
    entry.tools = request.tools;
    entry.tool_choice = request.tool_choice;
    res.on('close', () => {
      if (!res.writableFinished) entry.disconnected = true;
    });
    const stormed = b.limit_share > 0 && draw() < b.limit_share;
    const status = (b.bad_keys || []).includes(key) ? 401 : (b.limited_keys || []).includes(key) || stormed ? 429 : b.status;
    if (status && status !== 200) {
      if (stormed && b.ttft_ms >= 1) await new Promise((r) => setTimeout(r, b.ttft_ms));
      entry.status = status;
      entry.answered = Date.now();
      res.statusCode = status;
      if (status === 429 || b.retry_after) res.setHeader('Retry-After', String(b.retry_after ?? 1));
      res.setHeader('Content-Type', 'application/json');
      return res.end(JSON.stringify({ error: { message: `scripted ${status}`, type: 'scripted' } }));
    }
    entry.status = 200;
    const n = Math.min(b.tokens, entry.max_tokens ?? b.tokens);
    const pieces = words(b, n);
    const id = 'chatcmpl-fake' + entry.id;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: JSON.stringify(request.messages || []).length >> 2, completion_tokens: n };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    entry.usage = b.no_usage ? null : usage;  // what this upstream bills
    // Below a millisecond no timer at all: a fast upstream costs no event-loop turns.
    const sleep = (ms) => (ms >= 1 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());
    if (b.hang) {
      await new Promise((r) => res.on('close', r));
      return;
    }
    await sleep(b.ttft_ms);
    if (b.tool_call) {
      const call = { id: 'call_fake' + entry.id, type: 'function', function: { name: b.tool_call.name, arguments: b.tool_call.arguments } };
      if (!request.stream) {
        res.setHeader('Content-Type', 'application/json');
        return res.end(JSON.stringify({ id, object: 'chat.completion', created, model: request.model, usage,
          choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' }] }));
      }
      res.setHeader('Content-Type', 'text/event-stream');
      const ev = (delta, finish = null) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const args = call.function.arguments, half = args.length >> 1, index = b.tool_call.index ?? 0;
      res.write(ev({ role: 'assistant', content: null, tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }));
      res.write(ev({ tool_calls: [{ index, function: { arguments: args.slice(0, half) } }] }));
      res.write(ev({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }));
      res.write(ev({}, 'tool_calls'));
      return res.end('data: [DONE]\n\n');
    }
    if (!request.stream) {
      await sleep((n * 1000) / b.tokens_per_s);
      res.setHeader('Content-Type', 'application/json');
      return res.end(JSON.stringify({
        id, object: 'chat.completion', created, model: request.model,
        choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: n < b.tokens ? 'length' : 'stop' }],
        ...(b.no_usage ? {} : { usage }),
      }));
    }
    res.setHeader('Content-Type', 'text/event-stream');
    entry.answered = Date.now();  // the first write sends the status
    const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const chunk = (delta, finish = null) => ({ id, object: 'chat.completion.chunk', created, model: request.model,
                                               choices: [{ index: 0, delta, finish_reason: finish }] });
    send(chunk({ role: 'assistant', content: '' }));
    for (let i = 0; i < n; ++i) {
      if (entry.disconnected) return;
      if (b.drop_after !== undefined && i === b.drop_after) {
        entry.dropped = true;
        return res.socket.destroy();  // mid-stream: no finish, no [DONE]
      }
      send(chunk({ content: pieces[i] }));
      if (i + 1 < n) await sleep(1000 / b.tokens_per_s);
    }
    send(chunk({}, n < b.tokens ? 'length' : 'stop'));
    if (request.stream_options?.include_usage && !b.no_usage) send({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [], usage });
    res.end('data: [DONE]\n\n');
    entry.completed = true;
  });
  return new Promise((resolve) => {
    server.listen(port, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${server.address().port}`;
      resolve({
        url,
        port: server.address().port,
        async script(s) { await fetch(url + '/__script', { method: 'POST', body: JSON.stringify(s) }); },
        async log() { return (await fetch(url + '/__log')).json(); },
        async reset() { await fetch(url + '/__reset', { method: 'POST' }); },
        close() { server.closeAllConnections(); return new Promise((r) => server.close(r)); },
      });
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const up = await startFakeUpstream(Number(process.argv[2] || 0));
  console.log(JSON.stringify({ port: up.port, url: up.url }));
}
