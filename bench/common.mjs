// Helpers the Node benchmarks share: flags, percentiles, means with 95%
// confidence intervals (Student's t), free ports, and the peer's binaries.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const arg = (n, d) => { const i = process.argv.indexOf('--' + n); return i > 0 ? process.argv[i + 1] : d; };
export const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN; };
export const meanCi = (xs) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1));
  const t = [0, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36][xs.length - 1] ?? 1.96;
  return { mean: m, ci95: xs.length > 1 ? (t * sd) / Math.sqrt(xs.length) : NaN };
};
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function freePort() {
  return new Promise((resolve) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

// The pinned llama.cpp build's bin/: scripts/build-llama.sh prints its prefix
// at once when it is built (and builds it otherwise, 10-35 min).
function pinnedPeerBin() {
  const script = path.join(import.meta.dirname, '..', 'scripts/build-llama.sh');
  try {
    const out = execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    return path.join(out.trim().split('\n').pop(), 'bin');
  } catch {
    return '';
  }
}

// llama-server from HONE_PEER_BIN_DIR, --peer-bin or the pinned build, when
// `servers` asks for it; exits with the fix otherwise.
export function peerServer(servers) {
  if (!servers.includes('llama-server')) return '';
  const dir = process.env.HONE_PEER_BIN_DIR || arg('peer-bin', '') || pinnedPeerBin();
  const bin = dir ? path.join(dir, 'llama-server') : '';
  if (servers.includes('llama-server') && (!bin || !fs.existsSync(bin))) {
    console.error('set HONE_PEER_BIN_DIR to the pinned llama.cpp prefix\'s bin/ (scripts/build-llama.sh prints the prefix)');
    process.exit(1);
  }
  return bin;
}
