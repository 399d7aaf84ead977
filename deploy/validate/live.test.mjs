// The manifests against a running hone. The rendered pod is acted out on this
// machine: each volume becomes a folder (the ConfigMaps' files written in, the
// models folder holding the pinned model's name as a link to
// stories260K.gguf), the init container's own command and environment run the
// tune step, and the server container's own args and environment start
// `hone serve`, with three changes: --host=127.0.0.1, --port=0 and
// --probe-port=0. Then every probe path and every metric name the manifests
// use (probes, ServiceMonitor, KEDA query, prometheus-adapter rule, the
// endpoint picker's engineConfigs) must be there.
//
// Env (set by CTest, tests/deploy.cmake): HONE_BINARY (default ../../build/hone),
// HONE_SHARED (default ../../../shared), HONE_TEST_TMP (default the system's).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import {
  DEPLOY, argValue, containerEnv, expandedArgs, flagsOf, honeDeployments, parseObjects, referencedMetrics,
  referencedPaths, render, renderTargets, serverContainer,
} from './lib.mjs';

const HONE = path.resolve(process.env.HONE_BINARY || path.join(import.meta.dirname, '../../build/hone'));
const SHARED = path.resolve(process.env.HONE_SHARED || path.join(import.meta.dirname, '../../../shared'));
const TMP = process.env.HONE_TEST_TMP || os.tmpdir();
const MODEL = path.join(SHARED, 'models/stories260K.gguf');

const targets = renderTargets().map((t) => ({ name: path.relative(DEPLOY, t), objects: parseObjects(render(t), t) }));
const base = targets.find((t) => t.name === 'base').objects;
const deploy = honeDeployments(base)[0];
const pod = deploy.spec.template.spec;
const meta = { namespace: deploy.metadata.namespace, name: 'hone-0' };

// The environment a container gets: the test's own minus every HONE_* (hone
// reads HONE_<FLAG> as flags), plus the container's, with paths mapped.
function podEnv(container, map) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('HONE_')));
  for (const [k, v] of Object.entries(containerEnv(container, pod, meta))) env[k] = map(v);
  return { ...env, HOME: path.join(root, 'home') };
}

let root;
let volumes;  // volume name -> folder
// A container's path -> the folder standing in for it (the longest mount that holds it).
const mapper = (container) => (p) => {
  if (typeof p !== 'string' || !p.startsWith('/')) return p;
  const m = (container.volumeMounts ?? []).filter((v) => p === v.mountPath || p.startsWith(v.mountPath + '/'))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  return m ? path.join(volumes[m.name], p.slice(m.mountPath.length)) : p;
};
const mapArg = (map) => (a) => {
  const eq = a.indexOf('=');
  return a.startsWith('--') && eq > 0 ? a.slice(0, eq + 1) + map(a.slice(eq + 1)) : map(a);
};

before(() => {
  assert.ok(fs.existsSync(HONE), `no hone binary at ${HONE} (set HONE_BINARY)`);
  assert.ok(fs.existsSync(MODEL), `no ${MODEL} (set HONE_SHARED)`);
  fs.mkdirSync(TMP, { recursive: true });
  root = fs.mkdtempSync(path.join(TMP, 'deploy-live-'));
  fs.mkdirSync(path.join(root, 'home'));
  volumes = {};
  for (const v of pod.volumes) {
    const dir = path.join(root, 'volumes', v.name);
    fs.mkdirSync(dir, { recursive: true });
    volumes[v.name] = dir;
    if (v.configMap) {
      const cm = base.find((o) => o.kind === 'ConfigMap' && o.metadata.name === v.configMap.name);
      for (const [file, text] of Object.entries(cm.data)) fs.writeFileSync(path.join(dir, file), text);
    }
  }
  // The pinned model, by the name the Deployment pins, is stories260K.
  const server = serverContainer(deploy);
  const args = expandedArgs(server, containerEnv(server, pod, meta));
  const models = mapper(server)(argValue(args, '--models'));
  fs.symlinkSync(MODEL, path.join(models, `${argValue(args, '--pin')}.gguf`));
});

after(() => {
  if (root && !process.env.HONE_KEEP_TMP) fs.rmSync(root, { recursive: true, force: true });
});

test('every flag and HONE_* variable the manifests give hone serve is in `hone serve --help`', () => {
  const help = spawnSync(HONE, ['serve', '--help'], { encoding: 'utf8' });
  assert.equal(help.status, 0, help.stderr);
  const known = new Set([...help.stdout.matchAll(/(?:^|[\s,])(--[a-z][a-z0-9-]*)/g)].map((m) => m[1]));
  const knownEnv = new Set([...help.stdout.matchAll(/\[env (HONE_[A-Z0-9_]+)\]/g)].map((m) => m[1]));
  knownEnv.add('HONE_PROFILE_DIR');  // read by every command that uses profiles (src/tune/profile.cc)
  let checked = 0;
  for (const { name, objects } of targets) {
    for (const d of honeDeployments(objects)) {
      const server = serverContainer(d);
      const args = expandedArgs(server, containerEnv(server, d.spec.template.spec, meta));
      assert.equal(args[0], 'serve');
      for (const f of flagsOf(args.slice(1))) {
        assert.ok(known.has(f), `${name}: ${f} is not a hone serve flag`);
        checked++;
      }
      for (const c of [...(d.spec.template.spec.initContainers ?? []), server]) {
        for (const e of c.env ?? []) {
          if (e.name.startsWith('HONE_')) assert.ok(knownEnv.has(e.name), `${name}: ${c.name} sets ${e.name}, which hone does not read`);
        }
      }
    }
  }
  assert.ok(checked >= 8, `only ${checked} flags checked`);
});

let profileDir;
test('the init container tunes each model once per hardware fingerprint, then skips it', () => {
  const tune = pod.initContainers.find((c) => c.name === 'tune');
  const map = mapper(tune);
  const [cmd, ...rest] = [...tune.command, ...(tune.args ?? [])].map(map);
  // Its own environment, with a budget short enough for a test and 2 slots,
  // which makes the profile show in the server's metrics below.
  const env = { ...podEnv(tune, map), TUNE_HONE: HONE, TUNE_BUDGET: '1s', TUNE_CONCURRENCY: '2' };
  profileDir = env.HONE_PROFILE_DIR;
  assert.ok(profileDir.startsWith(volumes.profiles), profileDir);
  const run = () => spawnSync(cmd, rest, { env, encoding: 'utf8', timeout: 300_000 });
  const first = run();
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stderr, /done: 1 model\(s\), 1 tuned, 0 already tuned, 0 failed/, first.stderr);
  const fp = /hardware fingerprint ([0-9a-f]{16})/.exec(first.stderr)[1];
  const profiles = fs.readdirSync(profileDir).filter((f) => f.endsWith('.toml'));
  assert.equal(profiles.length, 1);
  assert.ok(profiles[0].startsWith(fp + '-'), profiles[0]);
  const mtime = fs.statSync(path.join(profileDir, profiles[0])).mtimeMs;
  const second = run();
  assert.equal(second.status, 0, second.stderr);
  assert.match(second.stderr, /done: 1 model\(s\), 0 tuned, 1 already tuned, 0 failed/, second.stderr);
  assert.equal(fs.statSync(path.join(profileDir, profiles[0])).mtimeMs, mtime, 'the second run rewrote the profile');
});

let server;
test('the Deployment\'s own args start hone; the pinned model loads and serves a completion', async () => {
  const c = serverContainer(deploy);
  const map = mapper(c);
  const env = podEnv(c, map);
  assert.equal(env.HONE_PROFILE_DIR, profileDir, 'the server reads another profile folder than tune wrote');
  const args = expandedArgs(c, containerEnv(c, pod, meta)).map(mapArg(map)).map((a) =>
    a.startsWith('--host=') ? '--host=127.0.0.1' : a.startsWith('--port=') ? '--port=0' : a.startsWith('--probe-port=') ? '--probe-port=0' : a);
  server = await start(HONE, args, env);
  const pin = argValue(args, '--pin');
  await until(async () => (await fetch(server.probes + '/health')).status === 200, 60_000, 'the pinned model never loaded');
  const r = await fetch(server.api + '/v1/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: pin, prompt: 'Once', max_tokens: 4 }),
  });
  const body = await r.text();
  assert.equal(r.status, 200, body);
  assert.equal(JSON.parse(body).model, pin);
});

test('every probe path and scrape path the manifests use answers 200 on its port', async () => {
  const refs = targets.flatMap((t) => referencedPaths(t.objects));
  assert.ok(refs.length >= 4, JSON.stringify(refs));
  for (const [p, port, where] of refs) {
    const url = { probes: server.probes, http: server.api }[port];
    assert.ok(url, `${where}: port ${port} is neither http nor probes`);
    assert.equal((await fetch(url + p)).status, 200, `${where}: GET ${p} on ${port}`);
  }
  // The probe port serves nothing else (so nothing there needs a key).
  assert.equal((await fetch(server.probes + '/v1/models')).status, 404);
});

test('every metric name the manifests use is in /metrics, and the tuned profile was applied', async () => {
  const text = await (await fetch(server.probes + '/metrics')).text();
  const present = new Set([...text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )/gm)].map((m) => m[1]));
  const refs = targets.flatMap((t) => referencedMetrics(t.objects));
  for (const [n, where] of refs) assert.ok(present.has(n), `${where}: ${n} is not in hone's /metrics`);
  // The extraction itself: the names the endpoint picker and the autoscalers need were all found.
  const names = new Set(refs.map(([n]) => n));
  for (const n of ['hone_num_requests_waiting', 'hone_num_requests_running', 'hone_kv_cache_usage_perc', 'hone_cache_config_info']) {
    assert.ok(names.has(n), `no manifest refers to ${n}: the extraction missed it`);
  }
  // --metrics-compat vllm: what an endpoint picker set up for vLLM would read.
  for (const n of ['vllm:num_requests_waiting', 'vllm:num_requests_running', 'vllm:kv_cache_usage_perc', 'vllm:cache_config_info']) {
    assert.ok(present.has(n), `${n} missing with --metrics-compat vllm`);
  }
  // The server found the profile the init step wrote: its slots are the profile's.
  const toml = fs.readFileSync(path.join(profileDir, fs.readdirSync(profileDir).find((f) => f.endsWith('.toml'))), 'utf8');
  const np = Number(/^n_parallel = (\d+)$/m.exec(toml)[1]);
  const slots = np > 1 ? np : Number(/^concurrency = (\d+)$/m.exec(toml)[1]);
  assert.match(text, new RegExp(`^hone_cache_config_info\\{[^}]*slots="${slots}"\\} 1$`, 'm'));
});

test('SIGTERM: hone exits cleanly well inside the termination grace period', async () => {
  const c = serverContainer(deploy);
  const drain = Number(argValue(expandedArgs(c, containerEnv(c, pod, meta)), '--drain-timeout'));
  const t0 = Date.now();
  server.proc.kill('SIGTERM');
  const code = await server.exited;
  const seconds = (Date.now() - t0) / 1000;
  assert.equal(code, 0, server.log());
  // Nothing was in flight, so no drain wait (tests/node/limits.test.mjs covers
  // draining with streams in flight).
  assert.ok(seconds < Math.min(drain, pod.terminationGracePeriodSeconds), `took ${seconds} s`);
  server = null;
});

after(() => server?.proc.kill('SIGKILL'));

// Starts hone and resolves once it printed both addresses.
function start(bin, args, env) {
  const proc = spawn(bin, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const exited = new Promise((r) => proc.on('exit', (code, sig) => r(code ?? sig)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('hone serve did not start:\n' + log)), 30_000);
    proc.stderr.on('data', (d) => {
      log += d;
      const probes = /probes \(\/health, \/livez, \/metrics\) on (http:\/\/\S+)/.exec(log);
      const api = /listening on (http:\/\/\S+)/.exec(log);
      if (probes && api) {
        clearTimeout(timer);
        resolve({ proc, exited, api: api[1], probes: probes[1], log: () => log });
      }
    });
    exited.then((code) => reject(new Error(`hone serve exited with ${code}:\n${log}`)));
  });
}

async function until(cond, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(what);
}
