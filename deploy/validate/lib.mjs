// What validate.mjs and the tests share: rendering deploy/ with kubectl
// kustomize, validating each object against its schema, hone's own rules for
// its manifests, and reading back what the manifests ask of a running hone
// (probe paths, metric names, flags).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

export const DEPLOY = path.resolve(import.meta.dirname, '..');
const SCHEMAS = path.join(import.meta.dirname, 'schemas');

// ---------------------------------------------------------------------------
// Rendering

// deploy/base and every folder under deploy/overlays that has a kustomization.
export function renderTargets() {
  const overlays = path.join(DEPLOY, 'overlays');
  const dirs = fs.readdirSync(overlays, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(overlays, d.name, 'kustomization.yaml')))
    .map((d) => path.join(overlays, d.name))
    .sort();
  return [path.join(DEPLOY, 'base'), ...dirs];
}

export class KubectlMissing extends Error {}

// The rendered YAML of one kustomization folder.
export function render(dir) {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error?.code === 'ENOENT') {
    throw new KubectlMissing(
      'kubectl is not on PATH: the deploy checks render deploy/ with `kubectl kustomize` ' +
      '(kubectl >= 1.27, which embeds kustomize v5). Install kubectl from the Kubernetes ' +
      'release packages (Debian has no kubectl package); scripts/install-deps.sh says so too.');
  }
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed:\n${r.stderr.trim()}`);
  return r.stdout;
}

// Objects of a multi-document YAML text; a syntax error throws.
export function parseObjects(text, source = 'input') {
  const docs = YAML.parseAllDocuments(text);
  const out = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${source}: ${d.errors.map((e) => e.message).join('; ')}`);
    const obj = d.toJS();
    if (obj !== null && obj !== undefined) out.push(obj);
  }
  return out;
}

export const describe = (o) => `${o?.kind ?? '?'}/${o?.metadata?.name ?? '?'}`;

// ---------------------------------------------------------------------------
// Schemas

// Built-in and third-party kinds: the kubernetes-models classes, each generated
// from the upstream OpenAPI schema or CRD and carrying a validate().
const MODEL_MODULES = {
  'v1': () => import('kubernetes-models/v1'),
  'apps/v1': () => import('kubernetes-models/apps/v1'),
  'policy/v1': () => import('kubernetes-models/policy/v1'),
  'autoscaling/v2': () => import('kubernetes-models/autoscaling/v2'),
  'rbac.authorization.k8s.io/v1': () => import('kubernetes-models/rbac.authorization.k8s.io/v1'),
  'monitoring.coreos.com/v1': () => import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'),
  'gateway.networking.k8s.io/v1': () => import('@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1'),
  'keda.sh/v1alpha1': () => import('@kubernetes-models/keda/keda.sh/v1alpha1'),
};

// CEL rules (x-kubernetes-validations) of the converted CRDs, by their exact
// text. The API server applies defaults before it runs them, so a rule reads
// the defaulted value where the schema has one.
const CEL = {
  // InferencePool.spec.endpointPickerRef; kind defaults to Service.
  "self.kind != 'Service' || has(self.port)": (self) => (self.kind ?? 'Service') !== 'Service' || self.port !== undefined,
  // InferencePool.spec.targetPorts
  'self.all(p1, self.exists_one(p2, p1.number==p2.number))': (self) =>
    self.every((p1) => self.filter((p2) => p1.number === p2.number).length === 1),
};

function makeAjv() {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
  addFormats(ajv);
  ajv.addFormat('int32', { type: 'number', validate: (n) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat('int64', { type: 'number', validate: (n) => Number.isInteger(n) });
  ajv.addKeyword({ keyword: 'x-kubernetes-group-version-kind', schemaType: 'object' });
  ajv.addKeyword({ keyword: 'x-kubernetes-map-type', schemaType: 'string' });
  ajv.addKeyword({ keyword: 'x-kubernetes-list-map-keys', schemaType: 'array' });
  ajv.addKeyword({
    keyword: 'x-kubernetes-list-type',
    schemaType: 'string',
    errors: true,
    compile(type, parent) {
      if (!['atomic', 'set', 'map'].includes(type)) throw new Error(`x-kubernetes-list-type ${type} is not known`);
      const keys = parent['x-kubernetes-list-map-keys'] ?? [];
      const key = (item) => JSON.stringify(type === 'map' ? keys.map((k) => item?.[k]) : item);
      const check = (data) => {
        check.errors = null;
        if (type === 'atomic' || !Array.isArray(data)) return true;
        const seen = new Set();
        for (const item of data) {
          const k = key(item);
          if (seen.has(k)) {
            check.errors = [{ keyword: 'x-kubernetes-list-type', message: `duplicate ${type} entry ${k}`, params: {} }];
            return false;
          }
          seen.add(k);
        }
        return true;
      };
      return check;
    },
  });
  ajv.addKeyword({
    keyword: 'x-kubernetes-validations',
    schemaType: 'array',
    errors: true,
    compile(rules) {
      const checks = rules.map((r) => {
        const impl = CEL[r.rule];
        if (!impl) throw new Error(`the CEL rule ${JSON.stringify(r.rule)} has no implementation in lib.mjs (CEL)`);
        return [r, impl];
      });
      const check = (data) => {
        const failed = checks.filter(([, impl]) => !impl(data));
        check.errors = failed.length
          ? failed.map(([r]) => ({ keyword: 'x-kubernetes-validations', message: r.message ?? `fails ${r.rule}`, params: { rule: r.rule } }))
          : null;
        return failed.length === 0;
      };
      return check;
    },
  });
  return ajv;
}

const ajv = makeAjv();
const readJson = (f) => JSON.parse(fs.readFileSync(path.join(SCHEMAS, f), 'utf8'));

// The converted CRDs (schemas/*.schema.json, from schemas/convert.mjs), by apiVersion and kind.
const CRD_VALIDATORS = new Map();
for (const f of fs.readdirSync(SCHEMAS).filter((f) => f.endsWith('.schema.json'))) {
  const schema = readJson(f);
  const gvk = schema['x-kubernetes-group-version-kind'];
  CRD_VALIDATORS.set(`${gvk.group}/${gvk.version}/${gvk.kind}`, ajv.compile(schema));
}
const eppConfigValidator = ajv.compile(readJson('endpointpickerconfig.json'));

const ajvErrors = (errors) => errors.map((e) => `${e.instancePath || '/'} ${e.message}`);

// Kubernetes object names and labels, which the OpenAPI schemas leave as plain strings.
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function metadataErrors(meta = {}) {
  const errs = [];
  if (!meta.name) errs.push('metadata.name is missing');
  else if (meta.name.length > 253 || !DNS_SUBDOMAIN.test(meta.name)) errs.push(`metadata.name ${meta.name} is not a DNS subdomain`);
  for (const [k, v] of Object.entries(meta.labels ?? {})) {
    if (!LABEL_NAME.test(k) || k.split('/').pop().length > 63) errs.push(`label key ${k} is not valid`);
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) errs.push(`label ${k}=${v} has an invalid value`);
  }
  return errs;
}

// Schema errors of one object (empty when valid). A kind that no schema here
// knows is an error, never a pass.
export async function schemaErrors(obj) {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return ['not an object'];
  const { apiVersion, kind } = obj;
  if (!apiVersion || !kind) return ['apiVersion and kind are required'];
  const errs = metadataErrors(obj.metadata);
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const crd = CRD_VALIDATORS.get(`${group}/${version}/${kind}`);
  if (crd) {
    if (!crd(obj)) errs.push(...ajvErrors(crd.errors));
    return errs;
  }
  const load = MODEL_MODULES[apiVersion];
  const Model = load ? (await load())[kind] : undefined;
  // Nested types are exported too (apps/v1 DeploymentSpec); only a top-level
  // kind carries its own apiVersion and kind.
  if (!Model || Model.kind !== kind || Model.apiVersion !== apiVersion) {
    return [`no schema for ${apiVersion} ${kind}: teach deploy/validate/lib.mjs this kind (unknown kinds fail)`];
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    errs.push(e.message);
  }
  return errs;
}

// ---------------------------------------------------------------------------
// Pods: environment, args, quantities

// A CPU or memory quantity as a number (cores, bytes).
export function parseQuantity(q) {
  if (typeof q === 'number') return q;
  const m = /^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$/.exec(String(q));
  if (!m) return NaN;
  const mult = { '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }[m[2]];
  return mult === undefined ? NaN : Number(m[1]) * mult;
}

// Kubernetes' $(VAR) expansion in env values, command and args: a defined
// variable is replaced, $$ escapes, anything else stays as written.
export function expand(text, env) {
  return String(text).replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) =>
    m === '$$' ? '$' : name in env ? env[name] : m);
}

// The environment a container sees from its own env list (the parts that can
// be known without a cluster: literals, resource fields, the pod's fields).
export function containerEnv(container, pod = {}, meta = { namespace: 'default', name: 'pod' }) {
  const env = {};
  const containers = [...(pod.initContainers ?? []), ...(pod.containers ?? [])];
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = expand(e.value, env);
    else if (e.valueFrom?.resourceFieldRef) {
      const ref = e.valueFrom.resourceFieldRef;
      const c = ref.containerName ? containers.find((x) => x.name === ref.containerName) : container;
      const [kind, res] = ref.resource.split('.');
      const value = parseQuantity(c?.resources?.[kind]?.[res]);
      env[e.name] = String(Math.ceil(value / parseQuantity(ref.divisor ?? '1')));
    } else if (e.valueFrom?.fieldRef) {
      env[e.name] = { 'metadata.namespace': meta.namespace, 'metadata.name': meta.name }[e.valueFrom.fieldRef.fieldPath] ?? '';
    } else env[e.name] = '';
  }
  return env;
}

export const expandedArgs = (container, env) => (container.args ?? []).map((a) => expand(a, env));

// The value of --flag in args written as --flag=value or --flag value.
export function argValue(args, flag) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i].startsWith(flag + '=')) return args[i].slice(flag.length + 1);
  }
  return undefined;
}

export const flagsOf = (args) => args.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]);

const labelsMatch = (selector = {}, labels = {}) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

// The hone server Deployments: pods labelled app.kubernetes.io/name: hone.
export const honeDeployments = (objects) => objects.filter((o) =>
  o.kind === 'Deployment' && o.spec?.template?.metadata?.labels?.['app.kubernetes.io/name'] === 'hone');

export const serverContainer = (deploy) =>
  deploy.spec.template.spec.containers.find((c) => (c.args ?? [])[0] === 'serve');

// A container port by name or number.
const portOf = (container, ref) =>
  (container.ports ?? []).find((p) => p.name === ref || p.containerPort === ref);

// Seconds a preStop hook holds the container before SIGTERM (exec sleep or the sleep action).
function preStopSeconds(container) {
  const pre = container.lifecycle?.preStop;
  if (!pre) return 0;
  if (pre.sleep) return Number(pre.sleep.seconds);
  const cmd = pre.exec?.command ?? [];
  if (cmd[0] === 'sleep' || cmd[0] === '/bin/sleep') return Number(cmd[1]);
  return NaN;  // a hook whose length is unknown
}

// ---------------------------------------------------------------------------
// ConfigMap contents

// The EndpointPickerConfig's schema and reference errors.
export function eppConfigErrors(cfg) {
  if (!eppConfigValidator(cfg)) return ajvErrors(eppConfigValidator.errors);
  const errs = [];
  const names = new Map();
  for (const p of cfg.plugins) {
    const name = p.name ?? p.type;
    if (names.has(name)) errs.push(`plugin name ${name} is used twice`);
    names.set(name, p);
  }
  for (const prof of cfg.schedulingProfiles) {
    for (const ref of prof.plugins) {
      if (!names.has(ref.pluginRef)) errs.push(`profile ${prof.name}: pluginRef ${ref.pluginRef} names no plugin`);
    }
  }
  const handlers = cfg.plugins.filter((p) => p.type === 'single-profile-handler');
  if (handlers.length && cfg.schedulingProfiles.length !== 1) errs.push('single-profile-handler needs exactly one scheduling profile');
  // hone's config relies on the EPP wiring these two by their default names.
  for (const type of ['metrics-data-source', 'core-metrics-extractor']) {
    const p = cfg.plugins.find((x) => x.type === type);
    if (!p) errs.push(`no ${type} plugin: the EPP would read vLLM's metric names, which hone only has with --metrics-compat vllm`);
    else if ((p.name ?? type) !== type) errs.push(`${type} must keep its type as its name (the EPP wires the data layer by these names)`);
  }
  const ext = cfg.plugins.find((p) => p.type === 'core-metrics-extractor');
  if (ext) {
    const params = ext.parameters ?? {};
    const engines = new Set(['vllm', 'sglang', ...(params.engineConfigs ?? []).map((e) => e.name)]);
    const def = params.defaultEngine ?? 'vllm';
    if (!engines.has(def)) errs.push(`defaultEngine ${def} is not in engineConfigs`);
    for (const e of params.engineConfigs ?? []) {
      for (const key of ['queuedRequestsSpec', 'runningRequestsSpec', 'kvUsageSpec', 'loraSpec', 'cacheInfoSpec']) {
        if (e[key] !== undefined && e[key] !== '' && !/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?$/.test(e[key])) {
          errs.push(`engine ${e.name}: ${key} ${JSON.stringify(e[key])} is not a metric spec (name or name{label=value})`);
        }
      }
    }
  }
  return errs;
}

function adapterRulesErrors(cfg) {
  const errs = [];
  if (!Array.isArray(cfg?.rules) || cfg.rules.length === 0) return ['prometheus-adapter config has no rules'];
  for (const [i, r] of cfg.rules.entries()) {
    const known = new Set(['seriesQuery', 'seriesFilters', 'resources', 'name', 'metricsQuery']);
    for (const k of Object.keys(r)) if (!known.has(k)) errs.push(`rules[${i}]: unknown key ${k}`);
    if (typeof r.seriesQuery !== 'string') errs.push(`rules[${i}]: seriesQuery is missing`);
    if (typeof r.metricsQuery !== 'string' || !r.metricsQuery.includes('<<.Series>>')) errs.push(`rules[${i}]: metricsQuery must use <<.Series>>`);
    const ov = r.resources?.overrides ?? {};
    if (!ov.namespace?.resource || !ov.pod?.resource) errs.push(`rules[${i}]: resources.overrides must map namespace and pod`);
  }
  return errs;
}

// Metric names a prometheus-adapter config serves (name.as, else the series name).
function adapterServes(cfg) {
  return (cfg?.rules ?? []).map((r) => r.name?.as ?? metricNamesIn(r.seriesQuery ?? '')[0]);
}

function shellSyntaxErrors(script) {
  const r = spawnSync('sh', ['-n'], { input: script, encoding: 'utf8' });
  return r.status === 0 ? [] : [`shell syntax: ${r.stderr.trim()}`];
}

// What a ConfigMap holds, by its keys; content nobody checks is an error.
function configMapRole(cm) {
  const keys = Object.keys(cm.data ?? {});
  if (keys.includes('epp-config.yaml')) return 'epp';
  if (keys.includes('tune-profiles.sh')) return 'tune';
  if (keys.includes('config.yaml') && /^rules:/m.test(cm.data['config.yaml'])) return 'prometheus-adapter';
  return null;
}

function configMapErrors(cm) {
  const role = configMapRole(cm);
  const data = cm.data ?? {};
  const parse = (key) => {
    try {
      return [YAML.parse(data[key]), []];
    } catch (e) {
      return [null, [`${key}: ${e.message}`]];
    }
  };
  if (role === 'epp') {
    const [cfg, errs] = parse('epp-config.yaml');
    return errs.length ? errs : eppConfigErrors(cfg).map((e) => `epp-config.yaml: ${e}`);
  }
  if (role === 'tune') return shellSyntaxErrors(data['tune-profiles.sh']);
  if (role === 'prometheus-adapter') {
    const [cfg, errs] = parse('config.yaml');
    return errs.length ? errs : adapterRulesErrors(cfg);
  }
  return [`ConfigMap with keys ${Object.keys(data).join(', ') || '(none)'} is not one lib.mjs knows how to check`];
}

// ---------------------------------------------------------------------------
// hone's rules for its own manifests, and references between objects

const HONE_DRAIN_GRACE_S = 5;  // after --drain-timeout, hone gives cut-off streams this long (api/http_server.cc)

function honeDeploymentErrors(d, objects) {
  const errs = [];
  const pod = d.spec.template.spec;
  const meta = { namespace: d.metadata.namespace ?? 'default', name: d.metadata.name };
  const server = serverContainer(d);
  if (!server) return ['no container runs `hone serve` (args[0] serve)'];
  const all = [...(pod.initContainers ?? []), ...pod.containers];

  // Guaranteed QoS with whole CPUs: what the static CPU manager needs for an exclusive cpuset.
  for (const c of all) {
    const req = c.resources?.requests ?? {};
    const lim = c.resources?.limits ?? {};
    for (const r of ['cpu', 'memory']) {
      if (req[r] === undefined || lim[r] === undefined) errs.push(`${c.name}: ${r} needs both a request and a limit (Guaranteed QoS)`);
      else if (parseQuantity(req[r]) !== parseQuantity(lim[r])) errs.push(`${c.name}: ${r} request ${req[r]} != limit ${lim[r]} (Guaranteed QoS)`);
    }
    if (lim.cpu !== undefined && !Number.isInteger(parseQuantity(lim.cpu))) errs.push(`${c.name}: cpu ${lim.cpu} is not a whole number of CPUs`);
  }
  const sizes = new Set(all.map((c) => `${c.resources?.limits?.cpu}/${c.resources?.limits?.memory}`));
  if (sizes.size > 1) errs.push('the tune init container and the server must have the same resources (it measures on the CPUs the server gets)');

  const env = containerEnv(server, pod, meta);
  const args = expandedArgs(server, env);
  const cpus = parseQuantity(server.resources?.limits?.cpu);
  if (argValue(args, '--threads') !== String(cpus)) errs.push(`--threads is ${argValue(args, '--threads')}, not the CPU count ${cpus}`);
  if (argValue(args, '--host') !== '0.0.0.0') errs.push('--host must be 0.0.0.0 in a pod (the kubelet and the Service reach the pod IP)');
  if (!argValue(args, '--pin')) errs.push('no --pin: /health would turn ready before any model is loaded, and the startupProbe would not cover the load');
  if (!argValue(args, '--models')) errs.push('no --models folder');
  for (const [name, flag] of [['http', '--port'], ['probes', '--probe-port']]) {
    const p = portOf(server, name);
    if (!p) errs.push(`no container port named ${name}`);
    else if (String(p.containerPort) !== argValue(args, flag)) errs.push(`port ${name} is ${p.containerPort} but ${flag} is ${argValue(args, flag)}`);
  }

  // Probes: all on the probe port; /health for startup and readiness, /livez for liveness.
  const want = { startupProbe: '/health', readinessProbe: '/health', livenessProbe: '/livez' };
  for (const [probe, p] of Object.entries(want)) {
    const get = server[probe]?.httpGet;
    if (!get) { errs.push(`${probe} must be an httpGet probe`); continue; }
    if (get.path !== p) errs.push(`${probe} path is ${get.path}, expected ${p}`);
    if (portOf(server, get.port)?.name !== 'probes') errs.push(`${probe} is not on the probes port`);
  }
  const sp = server.startupProbe;
  if (sp && (sp.periodSeconds ?? 10) * (sp.failureThreshold ?? 3) < 300) errs.push('startupProbe allows less than 300 s for the model to load');

  // Termination: the kubelet's SIGKILL must come after hone's drain.
  const drain = Number(argValue(args, '--drain-timeout') ?? 30);
  const pre = preStopSeconds(server);
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  if (Number.isNaN(pre)) errs.push('preStop hook of unknown length');
  else if (grace <= pre + drain + HONE_DRAIN_GRACE_S) {
    errs.push(`terminationGracePeriodSeconds ${grace} <= preStop ${pre} + --drain-timeout ${drain} + ${HONE_DRAIN_GRACE_S}`);
  }

  // Security: non-root, read-only root filesystem, no capabilities.
  for (const c of all) {
    const sc = c.securityContext ?? {};
    if (!(sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot)) errs.push(`${c.name}: runAsNonRoot is not set`);
    if (sc.readOnlyRootFilesystem !== true) errs.push(`${c.name}: readOnlyRootFilesystem is not true`);
    if (sc.allowPrivilegeEscalation !== false) errs.push(`${c.name}: allowPrivilegeEscalation is not false`);
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) errs.push(`${c.name}: capabilities do not drop ALL`);
  }

  // Volumes: models read-only from the hone-models claim; profiles on one volume for both containers.
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  const mountFor = (c, file) => (c.volumeMounts ?? [])
    .filter((m) => file === m.mountPath || file.startsWith(m.mountPath + '/'))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  const modelsMount = mountFor(server, argValue(args, '--models') ?? '');
  const modelsVol = modelsMount && volumes.get(modelsMount.name);
  if (!modelsVol?.persistentVolumeClaim) errs.push('--models is not on a PersistentVolumeClaim volume');
  else {
    if (modelsVol.persistentVolumeClaim.claimName !== 'hone-models') errs.push('the models claim is not hone-models');
    if (!modelsMount.readOnly) errs.push('the models volume is not mounted read-only');
  }
  const tune = (pod.initContainers ?? []).find((c) => c.name === 'tune');
  if (!tune) errs.push('no init container named tune');
  else {
    const tuneEnv = containerEnv(tune, pod, meta);
    const dir = env.HONE_PROFILE_DIR;
    if (!dir) errs.push('the server has no HONE_PROFILE_DIR: it would look for profiles in $HOME');
    else if (tuneEnv.HONE_PROFILE_DIR !== dir) errs.push(`tune writes profiles to ${tuneEnv.HONE_PROFILE_DIR}, the server reads ${dir}`);
    else {
      const tm = mountFor(tune, dir);
      const sm = mountFor(server, dir);
      if (!tm || !sm || tm.name !== sm.name) errs.push('HONE_PROFILE_DIR is not on one volume mounted in both containers');
      else if (tm.readOnly) errs.push('the tune container mounts the profile volume read-only');
    }
    const tuneModels = tuneEnv.TUNE_MODELS ?? '/models';
    if (mountFor(tune, tuneModels)?.name !== modelsMount?.name) errs.push(`tune's TUNE_MODELS ${tuneModels} is not the server's models volume`);
    const script = (tune.command ?? []).concat(tune.args ?? []).find((a) => a.endsWith('tune-profiles.sh'));
    const scriptMount = script && mountFor(tune, script);
    const cm = scriptMount && volumes.get(scriptMount.name)?.configMap;
    const cmObj = cm && objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === cm.name);
    if (!cmObj?.data?.[path.basename(script)]) errs.push('the tune init container does not run tune-profiles.sh from a ConfigMap in this render');
  }
  return errs;
}

// References between the rendered objects: selectors, ports, names.
export function policyErrors(objects) {
  const out = [];  // [object, message]
  const add = (o, msgs) => msgs.forEach((m) => out.push([o, m]));
  const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata?.name === name);
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  const podsMatching = (sel) => deployments.filter((d) => labelsMatch(sel, d.spec.template.metadata?.labels));
  const hone = honeDeployments(objects);
  if (!hone.length) out.push([null, 'no hone Deployment (pods labelled app.kubernetes.io/name: hone)']);

  for (const o of objects) {
    const e = [];
    switch (o.kind) {
      case 'Deployment': {
        const pod = o.spec.template.spec;
        if (!labelsMatch(o.spec.selector?.matchLabels, o.spec.template.metadata?.labels)) e.push('selector does not match the pod labels');
        for (const v of pod.volumes ?? []) {
          if (v.configMap && !find('ConfigMap', v.configMap.name)) e.push(`volume ${v.name}: ConfigMap ${v.configMap.name} is not in this render`);
          if (v.persistentVolumeClaim && !find('PersistentVolumeClaim', v.persistentVolumeClaim.claimName)) {
            e.push(`volume ${v.name}: claim ${v.persistentVolumeClaim.claimName} is not in this render`);
          }
        }
        if (pod.serviceAccountName && !find('ServiceAccount', pod.serviceAccountName)) e.push(`ServiceAccount ${pod.serviceAccountName} is not in this render`);
        if (hone.includes(o)) e.push(...honeDeploymentErrors(o, objects));
        const epp = pod.containers.find((c) => argValue(c.args ?? [], '--pool-name'));
        if (epp) e.push(...eppDeploymentErrors(o, epp, objects));
        break;
      }
      case 'Service': {
        const [d] = podsMatching(o.spec.selector);
        if (!d) { e.push('selector matches no Deployment in this render'); break; }
        const containers = d.spec.template.spec.containers;
        for (const p of o.spec.ports) {
          if (!containers.some((c) => portOf(c, p.targetPort ?? p.port))) e.push(`port ${p.name}: targetPort ${p.targetPort} is not a container port of ${describe(d)}`);
        }
        break;
      }
      case 'PodDisruptionBudget':
        if (!podsMatching(o.spec.selector?.matchLabels).length) e.push('selector matches no Deployment in this render');
        break;
      case 'ServiceMonitor': {
        const svc = objects.find((s) => s.kind === 'Service' && labelsMatch(o.spec.selector?.matchLabels, s.metadata.labels));
        if (!svc) { e.push('selector matches no Service in this render'); break; }
        for (const ep of o.spec.endpoints) {
          if (!svc.spec.ports.some((p) => p.name === ep.port)) e.push(`endpoint port ${ep.port} is not a port of Service ${svc.metadata.name}`);
          if (ep.port === 'probes' && ep.path !== '/metrics') e.push(`endpoint path ${ep.path} is not /metrics`);
        }
        break;
      }
      case 'InferencePool': {
        const [d] = podsMatching(o.spec.selector.matchLabels);
        if (!d) e.push('selector matches no Deployment in this render');
        else {
          const server = serverContainer(d) ?? d.spec.template.spec.containers[0];
          for (const t of o.spec.targetPorts) {
            if (portOf(server, t.number)?.name !== 'http') e.push(`targetPort ${t.number} is not the pods' http (API) port`);
          }
        }
        const ref = o.spec.endpointPickerRef;
        const svc = (ref.kind ?? 'Service') === 'Service' && find('Service', ref.name);
        if (!svc) e.push(`endpointPickerRef: Service ${ref.name} is not in this render`);
        else if (!svc.spec.ports.some((p) => p.port === ref.port?.number)) e.push(`endpointPickerRef port ${ref.port?.number} is not a port of Service ${ref.name}`);
        break;
      }
      case 'InferenceObjective':
        if (!find('InferencePool', o.spec.poolRef.name)) e.push(`poolRef: InferencePool ${o.spec.poolRef.name} is not in this render`);
        break;
      case 'HTTPRoute':
        for (const rule of o.spec.rules ?? []) {
          for (const b of rule.backendRefs ?? []) {
            const kind = b.kind ?? 'Service';
            if (kind === 'InferencePool' && b.group !== 'inference.networking.k8s.io') e.push(`backendRef ${b.name}: InferencePool's group is inference.networking.k8s.io, not ${b.group}`);
            if (!find(kind, b.name)) e.push(`backendRef ${kind} ${b.name} is not in this render`);
          }
        }
        break;
      case 'ScaledObject':
      case 'HorizontalPodAutoscaler': {
        const t = o.spec.scaleTargetRef;
        if (!find(t.kind ?? 'Deployment', t.name)) e.push(`scaleTargetRef ${t.name} is not in this render`);
        if (o.kind === 'ScaledObject') {
          for (const tr of o.spec.triggers) {
            if (tr.type === 'prometheus' && !metricNamesIn(tr.metadata?.query ?? '').length) e.push('prometheus trigger query names no hone metric');
          }
        } else {
          const served = objects.filter((c) => c.kind === 'ConfigMap' && configMapRole(c) === 'prometheus-adapter')
            .flatMap((c) => adapterServes(YAML.parse(c.data['config.yaml'])));
          for (const m of o.spec.metrics ?? []) {
            const name = m[m.type?.toLowerCase()]?.metric?.name;
            if (m.type === 'Pods' || m.type === 'External' || m.type === 'Object') {
              if (!served.includes(name)) e.push(`metric ${name} is served by no prometheus-adapter rule in this render`);
            }
          }
        }
        break;
      }
      case 'RoleBinding':
      case 'ClusterRoleBinding': {
        if (!find(o.roleRef.kind, o.roleRef.name)) e.push(`roleRef ${o.roleRef.kind} ${o.roleRef.name} is not in this render`);
        for (const s of o.subjects ?? []) {
          if (s.kind !== 'ServiceAccount') continue;
          const sa = find('ServiceAccount', s.name);
          if (!sa) e.push(`subject ServiceAccount ${s.name} is not in this render`);
          else if ((s.namespace ?? o.metadata.namespace) !== sa.metadata.namespace) e.push(`subject ${s.name} is in namespace ${s.namespace}, the ServiceAccount in ${sa.metadata.namespace}`);
        }
        break;
      }
      case 'ConfigMap':
        e.push(...configMapErrors(o));
        break;
      default:
    }
    add(o, e);
  }
  return out;
}

function eppDeploymentErrors(d, epp, objects) {
  const errs = [];
  const pod = d.spec.template.spec;
  const env = containerEnv(epp, pod, { namespace: d.metadata.namespace ?? 'default', name: d.metadata.name });
  const args = expandedArgs(epp, env);
  const pool = objects.find((o) => o.kind === 'InferencePool' && o.metadata.name === argValue(args, '--pool-name'));
  if (!pool) return [`--pool-name ${argValue(args, '--pool-name')} names no InferencePool in this render`];
  if ((argValue(args, '--pool-namespace') ?? d.metadata.namespace) !== pool.metadata.namespace) errs.push('--pool-namespace is not the pool\'s namespace');
  const servers = honeDeployments(objects).filter((h) => labelsMatch(pool.spec.selector.matchLabels, h.spec.template.metadata.labels));
  const probes = servers.map((h) => portOf(serverContainer(h), 'probes')?.containerPort);
  const scrape = argValue(args, '--model-server-metrics-port');
  if (!probes.length || probes.some((p) => String(p) !== scrape)) {
    errs.push(`--model-server-metrics-port ${scrape} is not the pool's probe port ${probes.join(',')}: the picker would scrape the API port`);
  }
  const file = argValue(args, '--config-file');
  const mount = file && (epp.volumeMounts ?? []).find((m) => file.startsWith(m.mountPath + '/'));
  const vol = mount && (pod.volumes ?? []).find((v) => v.name === mount.name);
  const cm = vol?.configMap && objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === vol.configMap.name);
  if (!cm?.data?.[path.basename(file)]) errs.push(`--config-file ${file} is not a key of a ConfigMap mounted there`);
  return errs;
}

// ---------------------------------------------------------------------------
// What the manifests ask of a running hone

// Metric names in a query or spec: hone's series all start with hone_ (or
// vllm: with --metrics-compat vllm), which tells them from PromQL functions
// and label names.
export function metricNamesIn(text) {
  return [...new Set([...String(text).matchAll(/(?<![A-Za-z0-9_:])(?:hone_|vllm:)[A-Za-z0-9_:]*/g)].map((m) => m[0]))];
}

// Every metric name the rendered objects refer to, with where.
export function referencedMetrics(objects) {
  const refs = [];
  for (const o of objects) {
    if (o.kind === 'ScaledObject') {
      for (const t of o.spec.triggers) for (const n of metricNamesIn(t.metadata?.query ?? '')) refs.push([n, `${describe(o)} query`]);
    }
    if (o.kind === 'ConfigMap' && configMapRole(o) === 'epp') {
      const cfg = YAML.parse(o.data['epp-config.yaml']);
      for (const p of cfg.plugins.filter((x) => x.type === 'core-metrics-extractor')) {
        for (const ec of p.parameters?.engineConfigs ?? []) {
          for (const [k, v] of Object.entries(ec)) if (k.endsWith('Spec') && v) refs.push([v.replace(/\{.*$/, ''), `${describe(o)} engine ${ec.name} ${k}`]);
        }
      }
    }
    if (o.kind === 'ConfigMap' && configMapRole(o) === 'prometheus-adapter') {
      for (const r of YAML.parse(o.data['config.yaml']).rules) for (const n of metricNamesIn(r.seriesQuery)) refs.push([n, `${describe(o)} seriesQuery`]);
    }
  }
  return refs;
}

// Every HTTP path the rendered objects fetch from a hone pod, with the
// container port name it is fetched on.
export function referencedPaths(objects) {
  const refs = [];
  for (const d of honeDeployments(objects)) {
    const c = serverContainer(d);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const get = c[probe]?.httpGet;
      if (get) refs.push([get.path, portOf(c, get.port)?.name, `${describe(d)} ${probe}`]);
    }
  }
  for (const sm of objects.filter((o) => o.kind === 'ServiceMonitor')) {
    const svc = objects.find((s) => s.kind === 'Service' && labelsMatch(sm.spec.selector?.matchLabels, s.metadata.labels));
    for (const ep of sm.spec.endpoints) {
      const target = svc?.spec.ports.find((p) => p.name === ep.port)?.targetPort;
      refs.push([ep.path ?? '/metrics', target, `${describe(sm)}`]);
    }
  }
  return refs;
}

// Every object of every render target, validated: [{target, object, errors}].
export async function validateAll(targets = renderTargets()) {
  const results = [];
  for (const dir of targets) {
    const label = path.relative(DEPLOY, dir);
    let objects;
    try {
      objects = parseObjects(render(dir), label);
    } catch (e) {
      if (e instanceof KubectlMissing) throw e;
      results.push({ target: label, object: null, errors: [e.message] });
      continue;
    }
    const policy = policyErrors(objects);
    for (const o of objects) {
      const errors = [...await schemaErrors(o), ...policy.filter(([p]) => p === o).map(([, m]) => m)];
      results.push({ target: label, object: o, errors });
    }
    for (const [, m] of policy.filter(([p]) => p === null)) results.push({ target: label, object: null, errors: [m] });
  }
  return results;
}
