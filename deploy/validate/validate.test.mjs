// The manifests render and validate, and the validation rejects what it
// should: each negative case below breaks one thing in a real rendered object
// and expects the error that names it. Needs kubectl (kustomize) on PATH.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';
import { convertAll, serialize } from './schemas/convert.mjs';
import {
  DEPLOY, eppConfigErrors, honeDeployments, parseObjects, policyErrors, render, renderTargets,
  schemaErrors, serverContainer, validateAll,
} from './lib.mjs';

const gateway = () => parseObjects(render(path.join(DEPLOY, 'overlays/gateway')), 'gateway');
const hpa = () => parseObjects(render(path.join(DEPLOY, 'overlays/hpa')), 'hpa');
const one = (objects, kind, name) => objects.find((o) => o.kind === kind && (!name || o.metadata.name === name));
const policyOf = (objects, obj) => policyErrors(objects).filter(([o]) => o === obj).map(([, m]) => m).join('\n');
const allPolicy = (objects) => policyErrors(objects).map(([, m]) => m).join('\n');

test('every target renders and every object validates', async () => {
  const targets = renderTargets().map((t) => path.relative(DEPLOY, t));
  for (const t of ['base', 'overlays/gateway', 'overlays/keda', 'overlays/hpa', 'overlays/numa']) assert.ok(targets.includes(t), t);
  const results = await validateAll();
  const failures = results.filter((r) => r.errors.length)
    .map((r) => `${r.target} ${r.object ? `${r.object.kind}/${r.object.metadata?.name}` : ''}: ${r.errors.join('; ')}`);
  assert.deepEqual(failures, []);
  const kinds = new Set(results.map((r) => r.object.kind));
  for (const k of ['Deployment', 'Service', 'PodDisruptionBudget', 'ServiceMonitor', 'InferencePool', 'InferenceObjective',
    'HTTPRoute', 'ScaledObject', 'HorizontalPodAutoscaler', 'ConfigMap']) assert.ok(kinds.has(k), `no ${k} rendered`);
});

test('validate.mjs prints a line per object and exits 0', () => {
  const r = spawnSync(process.execPath, ['validate.mjs'], { cwd: import.meta.dirname, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^ok {3}overlays\/gateway: inference\.networking\.k8s\.io\/v1 InferencePool\/hone$/m);
  assert.match(r.stdout, /6 target\(s\), \d+ object\(s\), 0 failed/);
});

test('validate.mjs exits 1 on a broken target and says why', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-deploy-'));
  fs.writeFileSync(path.join(dir, 'kustomization.yaml'), 'resources:\n- missing.yaml\n');
  const r = spawnSync(process.execPath, ['validate.mjs', dir], { cwd: import.meta.dirname, encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /FAIL .*\(render\)/);
  assert.match(r.stdout, /missing\.yaml/);
});

test('without kubectl the validation stops with what to install', () => {
  // A PATH with node but not kubectl.
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-nokubectl-'));
  fs.symlinkSync(process.execPath, path.join(bin, 'node'));
  const r = spawnSync(path.join(bin, 'node'), ['validate.mjs'], { cwd: import.meta.dirname, encoding: 'utf8', env: { PATH: bin } });
  fs.rmSync(bin, { recursive: true, force: true });
  assert.equal(r.status, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /kubectl is not on PATH.*kubectl kustomize/s);
});

test('the converted CRD schemas are what convert.mjs makes of the committed CRDs', () => {
  const converted = convertAll();
  assert.equal(converted.length, 2);
  for (const { name, schema } of converted) {
    assert.equal(fs.readFileSync(path.join(import.meta.dirname, 'schemas', name), 'utf8'), serialize(schema), `${name} is stale`);
  }
});

test('schema: a Deployment with replicas "two" is rejected', async () => {
  const d = structuredClone(one(gateway(), 'Deployment', 'hone'));
  d.spec.replicas = 'two';
  assert.match((await schemaErrors(d)).join('\n'), /replicas must be integer/);
});

test('schema: a CPU quantity that is not one is rejected', async () => {
  const d = structuredClone(one(gateway(), 'Deployment', 'hone'));
  d.spec.template.spec.containers[0].resources.limits.cpu = 'four';
  assert.match((await schemaErrors(d)).join('\n'), /cpu must match format "quantity"/);
});

test('schema: an InferencePool without a selector is rejected', async () => {
  const p = structuredClone(one(gateway(), 'InferencePool'));
  delete p.spec.selector;
  assert.match((await schemaErrors(p)).join('\n'), /must have required property 'selector'/);
});

test('schema: a misspelt InferencePool field is rejected, not pruned', async () => {
  const p = structuredClone(one(gateway(), 'InferencePool'));
  p.spec.targetPort = p.spec.targetPorts;
  delete p.spec.targetPorts;
  const errs = (await schemaErrors(p)).join('\n');
  assert.match(errs, /must NOT have additional properties/);
  assert.match(errs, /required property 'targetPorts'/);
});

test('schema: the InferencePool CEL rules run (picker port, unique target ports)', async () => {
  const p = structuredClone(one(gateway(), 'InferencePool'));
  delete p.spec.endpointPickerRef.port;
  p.spec.targetPorts = [{ number: 8080 }, { number: 8080 }];
  const errs = (await schemaErrors(p)).join('\n');
  assert.match(errs, /port is required when kind is 'Service'/);
  assert.match(errs, /port number must be unique/);
});

test('schema: an InferenceObjective with a string priority is rejected', async () => {
  const o = structuredClone(one(gateway(), 'InferenceObjective'));
  o.spec.priority = 'high';
  assert.match((await schemaErrors(o)).join('\n'), /priority must be integer/);
});

test('schema: unknown kinds fail, and so do nested types used as kinds', async () => {
  assert.match((await schemaErrors({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).join(), /no schema/);
  assert.match((await schemaErrors({ apiVersion: 'apps/v1', kind: 'DeploymentSpec', metadata: { name: 'w' } })).join(), /no schema/);
  assert.match((await schemaErrors({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'Bad_Name' } })).join(), /not a DNS subdomain/);
});

test('policy: the hone pod must be Guaranteed with whole CPUs and --threads equal to them', () => {
  const objects = gateway();
  const d = one(objects, 'Deployment', 'hone');
  const server = serverContainer(d);
  server.resources.requests.cpu = '3500m';
  server.resources.limits.cpu = '4';
  server.args = server.args.map((a) => (a.startsWith('--threads') ? '--threads=2' : a));
  d.spec.template.spec.initContainers[0].resources.limits.memory = '4Gi';
  const errs = policyOf(objects, d);
  assert.match(errs, /cpu request 3500m != limit 4/);
  assert.match(errs, /--threads is 2, not the CPU count 4/);
  assert.match(errs, /tune: memory request 8Gi != limit 4Gi/);
  assert.match(errs, /same resources/);
});

test('policy: probes, drain and security settings are checked', () => {
  const objects = gateway();
  const d = one(objects, 'Deployment', 'hone');
  const server = serverContainer(d);
  server.readinessProbe.httpGet.path = '/healthz';
  server.livenessProbe.httpGet.port = 'http';
  d.spec.template.spec.terminationGracePeriodSeconds = 30;
  d.spec.template.spec.initContainers[0].securityContext.readOnlyRootFilesystem = false;
  const errs = policyOf(objects, d);
  assert.match(errs, /readinessProbe path is \/healthz/);
  assert.match(errs, /livenessProbe is not on the probes port/);
  assert.match(errs, /terminationGracePeriodSeconds 30 <= preStop 5 \+ --drain-timeout 30/);
  assert.match(errs, /tune: readOnlyRootFilesystem is not true/);
});

test('policy: the tune step and the server must share the profile folder and the models', () => {
  const objects = gateway();
  const d = one(objects, 'Deployment', 'hone');
  const tune = d.spec.template.spec.initContainers[0];
  tune.env.find((e) => e.name === 'HONE_PROFILE_DIR').value = '/tmp/profiles';
  serverContainer(d).volumeMounts.find((m) => m.name === 'models').readOnly = false;
  const errs = policyOf(objects, d);
  assert.match(errs, /tune writes profiles to \/tmp\/profiles, the server reads \/var\/lib\/hone\/profiles\/cpus-4/);
  assert.match(errs, /models volume is not mounted read-only/);
});

test('policy: the pool, the picker and the route must point at each other', () => {
  const objects = gateway();
  const pool = one(objects, 'InferencePool');
  pool.spec.targetPorts = [{ number: 8081 }];
  const epp = one(objects, 'Deployment', 'hone-epp').spec.template.spec.containers[0];
  epp.args = epp.args.filter((a) => !a.startsWith('--model-server-metrics-port'));
  one(objects, 'HTTPRoute').spec.rules[0].backendRefs[0].name = 'other-pool';
  const errs = allPolicy(objects);
  assert.match(errs, /targetPort 8081 is not the pods' http \(API\) port/);
  assert.match(errs, /--model-server-metrics-port undefined is not the pool's probe port 8081/);
  assert.match(errs, /backendRef InferencePool other-pool is not in this render/);
});

test('policy: the HPA metric must be served by a prometheus-adapter rule', () => {
  const objects = hpa();
  one(objects, 'HorizontalPodAutoscaler').spec.metrics[0].pods.metric.name = 'hone_requests_waiting';
  assert.match(allPolicy(objects), /metric hone_requests_waiting is served by no prometheus-adapter rule/);
});

test('policy: ConfigMaps are checked by content, and unknown content fails', () => {
  const objects = gateway();
  const tune = objects.find((o) => o.kind === 'ConfigMap' && o.data['tune-profiles.sh']);
  tune.data['tune-profiles.sh'] += '\nif then fi\n';
  objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'stray', namespace: 'hone' }, data: { 'x.txt': 'x' } });
  const errs = allPolicy(objects);
  assert.match(errs, /shell syntax/);
  assert.match(errs, /keys x\.txt is not one lib\.mjs knows how to check/);
});

test('EPP config: the shipped one is valid, and its mistakes are caught', () => {
  const cm = gateway().find((o) => o.kind === 'ConfigMap' && o.data['epp-config.yaml']);
  const good = YAML.parse(cm.data['epp-config.yaml']);
  assert.deepEqual(eppConfigErrors(good), []);
  const bad = (mutate) => {
    const c = structuredClone(good);
    mutate(c);
    return eppConfigErrors(c).join('\n');
  };
  assert.match(bad((c) => { c.dataLayer = { sources: [] }; }), /must NOT have additional properties/);
  assert.match(bad((c) => { c.schedulingProfiles[0].plugins.push({ pluginRef: 'lora-scorer' }); }), /pluginRef lora-scorer names no plugin/);
  assert.match(bad((c) => { c.plugins.push({ type: 'least-kv-cache-scorer' }); }), /must be equal to one of the allowed values/);
  const ext = (c) => c.plugins.find((p) => p.type === 'core-metrics-extractor');
  assert.match(bad((c) => { ext(c).parameters.engineConfigs[0].queuedRequestSpec = 'x'; }), /must NOT have additional properties/);
  assert.match(bad((c) => { ext(c).parameters.defaultEngine = 'honey'; }), /defaultEngine honey is not in engineConfigs/);
  assert.match(bad((c) => { ext(c).parameters.engineConfigs[0].kvUsageSpec = 'hone kv'; }), /is not a metric spec/);
  assert.match(bad((c) => { ext(c).name = 'metrics'; }), /must keep its type as its name/);
});

test('the hone Deployment is found in every target', () => {
  for (const t of renderTargets()) {
    const objects = parseObjects(render(t), t);
    assert.equal(honeDeployments(objects).length, 1, t);
  }
});
