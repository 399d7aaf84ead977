#!/usr/bin/env node
// Budget path: the latency a budget adds to a priced request, reserve before
// plus settle after (bench/ledger_path.cc, the router's own Spend calls), on
// SQLite (the default ledger) and on a throwaway PostgreSQL started here
// (scripts/pg-cluster.sh), at 1 and 64 concurrent clients. Each cell is 5
// repetitions; the table gives the mean of their p50 and p99 with a 95%
// confidence interval. Goal (issue 10): under 0.2 ms at p50 for SQLite.
//
// Usage: node bench/budget_path.mjs [--reps 5]   (after ./setup.sh or scripts/build-hone.sh)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
const REPS = Number(arg('reps', 5));
const BIN = path.join(root, 'build/bench/ledger_path');
if (!fs.existsSync(BIN)) execFileSync('ninja', ['-C', path.join(root, 'build'), 'ledger_path'], { stdio: 'inherit' });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'hone-budget-'));
const urlFile = path.join(tmp, 'pg.url');
execFileSync('bash', [path.join(root, 'scripts/pg-cluster.sh'), 'start', urlFile], { stdio: 'inherit' });
const rows = [];
try {
  const env = { ...process.env, HONE_PG_URL: fs.readFileSync(urlFile, 'utf8').trim() };
  for (const ledger of ['sqlite', 'postgres']) {
    for (const clients of [1, 64]) {
      const ops = clients === 1 ? 2000 : 40;
      const args = ['--ledger', ledger, '--clients', String(clients), '--ops', String(ops), '--reps', String(REPS),
        '--state-dir', path.join(tmp, `state-${ledger}-${clients}`), '--conninfo-env', 'HONE_PG_URL'];
      const r = JSON.parse(execFileSync(BIN, args, { env }).toString());
      rows.push(r);
      console.log(`${ledger} x${clients}: p50 ${r.p50_ms.mean.toFixed(3)} ms, p99 ${r.p99_ms.mean.toFixed(3)} ms`);
    }
  }
} finally {
  execFileSync('bash', [path.join(root, 'scripts/pg-cluster.sh'), 'stop', urlFile], { stdio: 'inherit' });
  fs.rmSync(tmp, { recursive: true, force: true });
}
const info = JSON.parse(execFileSync(path.join(root, 'build/hone'), ['info', '--json', '--no-bandwidth']).toString());
const stamp = new Date().toISOString().replace(/[-:]/g, '').slice(0, 13).replace('T', '-');
const base = path.join(root, 'bench/results', `budget_path-vm-${stamp}`);
const f = (x) => `${x.mean.toFixed(3)} ± ${x.ci95.toFixed(3)}`;
const md = [
  '# budget path: reserve + settle per priced request',
  '',
  `- date: ${new Date().toISOString()}`,
  `- machine: ${info.cpu_model}, ${info.logical_cpus} CPUs`,
  '- one request = Spend::Reserve (worst case held on a global monthly budget and an upstream\'s monthly and daily caps, one transaction) + Spend::Settle (the ledger row, spend added, hold released, one transaction)',
  `- ${REPS} repetitions per cell; mean ± 95% CI over repetitions; SQLite in WAL mode (synchronous=NORMAL, checkpoints off the request path), owned by the process: its holds are in memory and only the settle writes; PostgreSQL 15 on a Unix socket, fsync off (a throwaway cluster), 8 connections per process, holds in the database`,
  '- command: `node bench/budget_path.mjs`',
  '',
  '| ledger | clients | p50 ms | p99 ms | requests/s |',
  '|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.ledger} | ${r.clients} | ${f(r.p50_ms)} | ${f(r.p99_ms)} | ${r.requests_per_s.mean.toFixed(0)} |`),
  '',
  'At 64 clients every request updates the same budget rows, so the ledger serialises them (in arrival order): the p99 is the queue behind 63 others, not the cost of one.',
];
fs.writeFileSync(base + '.md', md.join('\n') + '\n');
fs.writeFileSync(base + '.json', JSON.stringify({ machine: info.cpu_model, rows }, null, 2));
console.log(md.join('\n'));
