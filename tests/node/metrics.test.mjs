// The model-server protocol that Kubernetes' inference gateway reads: the
// gauges move under load, the text passes `promtool check metrics`, the vLLM
// aliases are there with --metrics-compat vllm, and the probe port answers
// /health, /livez and /metrics while slow clients hold every API worker.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { startServer, modelsDir, post, sleep } from './helpers.mjs';

let server, probe;
const MODEL = 'llama-2-tiny-random';  // random weights: rarely ends early, so streams last

before(async () => {
  server = await startServer(['--models', modelsDir(), '--slots', '1', '--max-queue', '16', '--probe-port', '0',
                              '--metrics-compat', 'vllm', '--max-connections', '20'], { HONE_API_KEYS: 'k-metrics' });
  probe = /probes \([^)]*\) on (http:\/\/[^\s]+)/.exec(server.log())[1];
});
after(async () => server && server.stop());

const scrape = async () => (await fetch(probe + '/metrics')).text();
function sample(text, name, model = MODEL) {
  const re = new RegExp(`^${name.replace(/:/g, '\\:')}\\{model_name="${model}"[^}]*\\} ([0-9.e+-]+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : null;
}
// A GET on a new connection (fetch would reuse a kept-alive one, whose
// worker is already held): resolves to the status, or 'timeout'.
function freshGet(url, ms) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: ms }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('timeout', () => {
      req.destroy();
      resolve('timeout');
    });
    req.on('error', () => resolve('error'));
  });
}
function promtool(text) {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.ok(!r.error, 'promtool is needed (Debian package prometheus; scripts/install-deps.sh): ' + r.error);
  return { status: r.status, problems: (r.stdout + r.stderr).split('\n').filter((l) => l.trim()) };
}
// The vLLM-named families alone (the lint forbids ':' in names, so they are
// checked apart: every problem promtool finds must be that one).
function split(text) {
  const hone = [], vllm = [];
  for (const line of text.split('\n')) (/^(# (HELP|TYPE) )?vllm:/.test(line) ? vllm : hone).push(line);
  return { hone: hone.join('\n') + '\n', vllm: vllm.join('\n') + '\n' };
}

test('the gauges move under load, and the text passes promtool', async () => {
  const auth = { Authorization: 'Bearer k-metrics' };
  // Loads the model, so its series exist before the load starts.
  const first = await post(server.url + '/v1/completions', { model: MODEL, prompt: 'hi', max_tokens: 2 }, auth);
  assert.equal(first.status, 200, first.text);
  // A client that scrapes as soon as its answer arrives never finds its own
  // finished request still running (the gauge was once set after the answer
  // went out: a third of these scrapes saw 1).
  for (let i = 0; i < 30; ++i) {
    const r = await post(server.url + '/v1/completions', { model: MODEL, prompt: 'hi', max_tokens: 2 }, auth);
    assert.equal(r.status, 200, r.text);
    assert.equal(sample(await scrape(), 'hone_num_requests_running'), 0, `scrape ${i} right after an answer`);
  }
  const idle = await scrape();
  assert.equal(sample(idle, 'hone_num_requests_running'), 0);
  assert.equal(sample(idle, 'hone_num_requests_waiting'), 0);
  assert.match(idle, new RegExp(`^hone_cache_config_info\\{model_name="${MODEL}",block_size="1",num_gpu_blocks="\\d+",slots="1"\\} 1$`, 'm'));
  assert.match(idle, new RegExp(`^vllm:cache_config_info\\{model_name="${MODEL}",block_size="1",num_gpu_blocks="\\d+",slots="1"\\} 1$`, 'm'));

  // One slot and ten long requests: one runs, the rest wait. The scrape that
  // counts is one that sees a sequence in the KV cache too: between two
  // requests the slot is taken before its prompt is decoded. Scrapes go on
  // until every request has answered, however fast the machine decodes.
  const body = { model: MODEL, prompt: 'Once upon a time', max_tokens: 300, temperature: 0 };
  let settled = false;
  const all = Promise.all(Array.from({ length: 10 }, () => post(server.url + '/v1/completions', body, auth)));
  all.finally(() => { settled = true; });
  let busy = null;
  while (!busy && !settled) {
    const t = await scrape();
    if (sample(t, 'hone_num_requests_running') >= 1 && sample(t, 'hone_num_requests_waiting') >= 3 &&
        sample(t, 'hone_kv_cache_usage_perc') > 0)
      busy = t;
  }
  assert.ok(busy, 'never saw one running, several waiting and KV in use:\n' + (await scrape()));
  assert.ok(sample(busy, 'hone_kv_cache_usage_perc') <= 1);
  for (const n of ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc', 'gpu_cache_usage_perc'])
    assert.notEqual(sample(busy, 'vllm:' + n), null, 'vllm:' + n + ' is missing');
  assert.equal(sample(busy, 'vllm:num_requests_waiting'), sample(busy, 'hone_num_requests_waiting'));

  for (const r of await all) assert.equal(r.status, 200, r.text);
  const done = await scrape();
  assert.equal(sample(done, 'hone_num_requests_waiting'), 0);
  assert.equal(sample(done, 'hone_num_requests_running'), 0);
  // Ten requests with the same prompt after a first: the prefix cache was queried and hit.
  assert.ok(sample(done, 'hone_prefix_cache_queries_total') >= 10 * 4);
  assert.ok(sample(done, 'hone_prefix_cache_hits_total') > 0);
  assert.equal(sample(done, 'vllm:prefix_cache_hits_total'), sample(done, 'hone_prefix_cache_hits_total'));

  for (const text of [busy, done]) {
    const { hone, vllm } = split(text);
    const own = promtool(hone);
    assert.equal(own.status, 0, 'promtool on the hone_ series:\n' + own.problems.join('\n'));
    const compat = promtool(vllm);
    assert.ok(compat.problems.length > 0);
    for (const p of compat.problems) assert.match(p, /^vllm:\S+ metric names should not contain ':'$/);
  }
});

test('the probe port and the API port both answer at once while slow clients flood the API port', async () => {
  // Sockets that send half a request and stall. Before the connection gate,
  // 150 held every API worker (--max-connections 20 plus its reserve of 64)
  // and /health on the API port waited for the header deadline; now they
  // wait in the gate and hold none. The probe port has workers of its own.
  const host = new URL(server.url);
  const stalled = [];
  for (let i = 0; i < 150; ++i) {
    const s = net.connect(Number(host.port), host.hostname);
    s.on('error', () => {});
    s.write('GET /health HTTP/1.1\r\nHost: localhost\r\n');
    stalled.push(s);
  }
  await sleep(300);
  try {
    for (const url of [probe, server.url]) {
      for (const path of ['/health', '/livez']) {
        const t0 = performance.now();
        const status = await freshGet(url + path, 2000);
        const ms = performance.now() - t0;
        assert.equal(status, 200, url + path);
        assert.ok(ms < 100, `${path} took ${ms.toFixed(0)} ms on ${url}`);
      }
    }
    assert.equal(await freshGet(probe + '/metrics', 2000), 200);
    assert.deepEqual(await (await fetch(probe + '/livez')).json(), { status: 'alive' });
    const text = await (await fetch(probe + '/metrics')).text();
    const waiting = Number(/^hone_http_connections_waiting (\d+)$/m.exec(text)[1]);
    assert.ok(waiting >= 150, `${waiting} connections waiting in the gate`);
  } finally {
    for (const s of stalled) s.destroy();
  }
});

test('clients that drip their requests to the probe port are closed within 2 s, and probes answer again', async () => {
  // The probe port has 4 workers: 8 dripping clients would hold them all for
  // as long as they like without a whole-request deadline.
  const u = new URL(probe);
  const drippers = [];
  for (let i = 0; i < 8; ++i) {
    const s = net.connect(Number(u.port), u.hostname);
    s.on('error', () => {});
    s.write('GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    const timer = setInterval(() => { if (!s.destroyed) s.write('a'); }, 300);
    s.on('close', () => clearInterval(timer));
    drippers.push({ s, timer });
  }
  try {
    // The first four hold the workers until their 2 s deadline closes them.
    const closedCount = () => drippers.filter((d) => d.s.destroyed || d.s.readyState !== 'open').length;
    for (let i = 0; i < 80 && closedCount() < 4; ++i) await sleep(100);
    const closed = closedCount();
    assert.ok(closed >= 4, `${closed} of 8 dripping clients closed within 8 s`);
    // The last four took the workers when the first were closed: a probe now
    // waits for them to be closed too (a second or so), not for ever.
    assert.equal(await freshGet(probe + '/health', 6000), 200, 'the probe port answers again');
  } finally {
    for (const d of drippers) { clearInterval(d.timer); d.s.destroy(); }
  }
});

test('the probe port serves probes only, with the Host check, and no key', async () => {
  assert.equal((await fetch(probe + '/metrics')).status, 200);
  const other = await post(probe + '/v1/completions', { model: MODEL, prompt: 'x' });
  assert.equal(other.status, 404);
  assert.match(other.text, /probe port serves GET \/health, \/livez and \/metrics/);
  const url = new URL(probe);
  const r = execFileSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'Host: evil.example',
                                  `http://127.0.0.1:${url.port}/metrics`], { encoding: 'utf8' });
  assert.equal(r, '403');
  // The API port still wants the key for /metrics.
  assert.equal((await fetch(server.url + '/metrics')).status, 401);
  assert.equal((await fetch(server.url + '/livez')).status, 200);
});
