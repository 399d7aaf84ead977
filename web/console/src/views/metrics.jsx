// Live charts from /metrics: generated tokens/s, TTFT p50 and p99 over the
// last 30 s, requests waiting, and the prefix-cache hit rate. The history
// lives in the page (the last 10 minutes at one point every 2 s).
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { Chart } from '../chart.jsx';
import { usePoll } from '../hooks.js';
import { parseMetrics, quantileBetween, sum } from '../prometheus.js';

const KEEP = 300;
const WINDOW_S = 30;
// Kept across visits to the view while the page stays open.
const history = { snaps: [], points: [] };

function point(now, prev, windowStart) {
  const dt = prev ? (now.at - prev.at) / 1000 : 0;
  const rate = (name) => (prev && dt > 0 ? (sum(now.samples, name) - sum(prev.samples, name)) / dt : null);
  const hits = prev ? sum(now.samples, 'hone_prefix_cache_hits_total') - sum(prev.samples, 'hone_prefix_cache_hits_total') : 0;
  const queries = prev ? sum(now.samples, 'hone_prefix_cache_queries_total') - sum(prev.samples, 'hone_prefix_cache_queries_total') : 0;
  const ttft = (q) => quantileBetween(windowStart?.samples, now.samples, 'hone_time_to_first_token_seconds', q);
  return {
    t: now.at / 1000,
    tps: rate('hone_generation_tokens_total'),
    p50: ttft(0.5),
    p99: ttft(0.99),
    waiting: sum(now.samples, 'hone_num_requests_waiting'),
    hit: queries > 0 ? hits / queries : null,
  };
}

export function MetricsView() {
  const [, setTick] = useState(0);
  const { error } = usePoll(async () => {
    const snap = { at: Date.now(), samples: parseMetrics(await api('/metrics')) };
    const snaps = history.snaps;
    const prev = snaps[snaps.length - 1];
    const windowStart = snaps.find((s) => s.at >= snap.at - WINDOW_S * 1000) || prev;
    snaps.push(snap);
    if (snaps.length > WINDOW_S) snaps.shift();
    history.points.push(point(snap, prev, windowStart));
    if (history.points.length > KEEP) history.points.shift();
    setTick((n) => n + 1);
  }, 2000);
  const p = history.points;
  const col = (k, scale = 1) => p.map((x) => (x[k] == null ? null : x[k] * scale));
  const xs = p.map((x) => x.t);
  return (
    <section>
      <h2>Metrics</h2>
      {error && <div class="error">{error.message}</div>}
      <div class="charts">
        <Chart title="Generated tokens/s" testid="chart-tps" series={[{ label: 'tok/s', stroke: '#16a34a' }]} data={[xs, col('tps')]} />
        <Chart title={`TTFT over the last ${WINDOW_S} s (ms)`} testid="chart-ttft"
          series={[{ label: 'p50', stroke: '#2563eb' }, { label: 'p99', stroke: '#dc2626' }]} data={[xs, col('p50', 1000), col('p99', 1000)]} />
        <Chart title="Requests waiting" testid="chart-queue" series={[{ label: 'waiting', stroke: '#9333ea' }]} data={[xs, col('waiting')]} />
        <Chart title="Prefix cache hit rate (%)" testid="chart-cache" series={[{ label: 'hit rate', stroke: '#ea580c' }]} data={[xs, col('hit', 100)]} />
      </div>
    </section>
  );
}
