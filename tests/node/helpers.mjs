// Starts `hone serve` on a free loopback port with small real models and
// stops it after the tests. Paths come from CTest (tests/serve.cmake):
// HONE_BINARY, HONE_SHARED, HONE_TEST_TMP.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');
export const HONE = process.env.HONE_BINARY || path.join(root, 'build/hone');
export const SHARED = process.env.HONE_SHARED || path.resolve(root, '../shared');
export const TMP = process.env.HONE_TEST_TMP || path.join(root, 'build/test-tmp');

// A folder of models named by file stem: stories260K (trained, no chat
// template), tiny (synthetic Qwen2 shape with its chat template), and the
// random llama-2 model whose byte tokens break UTF-8.
export function modelsDir() {
  const dir = path.join(TMP, 'serve-node-models');
  fs.mkdirSync(dir, { recursive: true });
  const tiny = path.join(dir, 'tiny.gguf');
  // A model older than the binary may come from an older synth: make it again.
  if (!fs.existsSync(tiny) || fs.statSync(tiny).mtimeMs < fs.statSync(HONE).mtimeMs) {
    execFileSync(HONE, ['synth', '--like', 'tiny', '--out', tiny + '.part'], { stdio: 'ignore' });
    fs.renameSync(tiny + '.part', tiny);
  }
  for (const f of ['stories260K.gguf', 'llama-2-tiny-random.gguf']) {
    const link = path.join(dir, f);
    if (!fs.existsSync(link)) fs.symlinkSync(path.join(SHARED, 'models', f), link);
  }
  return dir;
}

// Resolves once the server prints its address. `env` adds HONE_* variables.
let serverCount = 0;
export async function startServer(args = [], env = {}) {
  // A server that routes keeps a spend ledger: by default each test server's
  // goes to its own folder under TMP, never to the user's ~/.local/state.
  const state = path.join(TMP, `state-${process.pid}-${++serverCount}`);
  const threads = args.includes('--threads') ? [] : ['--threads', '2'];
  const proc = spawn(HONE, ['serve', '--port', '0', ...threads, ...args], {
    env: { ...process.env, XDG_STATE_HOME: state, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('hone serve did not start:\n' + log)), 20000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`hone serve exited with ${code}:\n${log}`)));
  });
  const exited = new Promise((r) => proc.on('exit', (code, sig) => r(code ?? sig)));
  // Waiters for a log line, checked on each piece of stderr (after `log` grew).
  const waiters = new Set();
  proc.stderr.on('data', () => {
    for (const w of [...waiters]) w();
  });
  return {
    url,
    pid: proc.pid,
    log: () => log,
    // Resolves with the match once the log, from offset `from` on, matches `re`:
    // wait on the server's own word for an event instead of sleeping.
    waitLog(re, { from = 0, ms = 30000 } = {}) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = re.exec(log.slice(from));
          if (!m) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no log line matching ${re} within ${ms} ms:\n${log.slice(-2000)}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    signal: (sig) => proc.kill(sig),
    exited,  // resolves to the exit code (or the signal's name)
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;  // exited, or killed by a signal
      const exited = new Promise((r) => proc.on('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

export async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

// `key`: for a server with API keys, where /metrics on the API port needs one.
export async function metric(url, name, model, key = null) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const text = await (await fetch(url + '/metrics', { headers })).text();
  const re = new RegExp(`^${name.replace(/[:]/g, '\\:')}\\{model_name="${model}"\\} ([0-9.e+-]+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : null;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// CI runs `.ci/run` with CI=true (GitHub's convention). There a test whose
// prerequisite is missing fails with the reason; elsewhere it is skipped with
// the same message, so a developer without the tool still runs the rest.
export const IN_CI = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase());
export function skipOrFail(t, reason) {
  if (IN_CI) throw new Error(`${reason} (CI=${process.env.CI}: a missing prerequisite fails in CI instead of skipping)`);
  return t.skip(reason);
}
