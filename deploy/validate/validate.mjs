#!/usr/bin/env node
// Renders deploy/base and every deploy/overlays/* with `kubectl kustomize`,
// validates each object against its schema (kubernetes-models for built-in,
// prometheus-operator, Gateway API and KEDA kinds; the converted upstream CRDs
// for InferencePool and InferenceObjective; a schema of its own for the
// endpoint picker's config) and against hone's rules for its manifests, and
// prints one line per object. Exits 1 on any failure, 2 when kubectl is missing.
//
//   node validate.mjs                      every target
//   node validate.mjs ../overlays/gateway  just these folders
import path from 'node:path';
import { KubectlMissing, describe, renderTargets, validateAll } from './lib.mjs';

const args = process.argv.slice(2);
const targets = args.length ? args.map((a) => path.resolve(a)) : renderTargets();
let results;
try {
  results = await validateAll(targets);
} catch (e) {
  if (!(e instanceof KubectlMissing)) throw e;
  console.error(`error: ${e.message}`);
  process.exit(2);
}
let failed = 0;
for (const { target, object, errors } of results) {
  const what = object ? `${object.apiVersion} ${describe(object)}` : '(render)';
  if (errors.length) {
    failed++;
    console.log(`FAIL ${target}: ${what}`);
    for (const e of errors) console.log(`       ${e}`);
  } else {
    console.log(`ok   ${target}: ${what}`);
  }
}
const objects = results.filter((r) => r.object).length;
console.log(`\n${targets.length} target(s), ${objects} object(s), ${failed} failed`);
process.exit(failed ? 1 : 0);
