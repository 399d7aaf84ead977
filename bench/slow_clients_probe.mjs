// The probes of bench/slow_clients.mjs, on a thread of their own: GET /health
// every 100 ms and a one-token chat every 250 ms, each on a fresh connection
// with a 5 s timeout. They run apart from the thread that drives the ten
// thousand slow connections so that its bursts of writes do not show up as
// server latency (as when the slow clients are other machines).
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import { sleep } from './common.mjs';

// One request on a fresh connection; its time to the end of the answer.
export function request(url, body) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request(url, { method: body ? 'POST' : 'GET', agent: false, timeout: 5000,
                                    headers: body ? { 'Content-Type': 'application/json' } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: performance.now() - t0, at: t0 + performance.timeOrigin }));
    });
    req.on('timeout', () => { req.destroy(); resolve({ status: 'timeout', ms: performance.now() - t0 }); });
    req.on('error', (e) => resolve({ status: e.code || 'error', ms: performance.now() - t0 }));
    req.end(body);
  });
}

// Repeats `probe` every `everyMs` until `end`, collecting what it answers.
async function every(everyMs, end, probe) {
  const out = [];
  while (performance.now() < end) {
    out.push(await probe());
    await sleep(everyMs);
  }
  return out;
}

if (parentPort) {
  const { url, chatBody, seconds, health, chatEveryMs } = workerData;
  const end = performance.now() + seconds * 1000;
  const [chat, healthSamples] = await Promise.all([
    every(chatEveryMs, end, () => request(url + '/v1/chat/completions', chatBody)),
    health ? every(100, end, () => request(url + '/health')) : [],
  ]);
  parentPort.postMessage({ chat, health: healthSamples });
}
