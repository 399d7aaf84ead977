// Routes: each route's targets, policy, overflow share, response cache, and
// per upstream its breaker, in-flight count and keys (by fingerprint only).
import { api } from '../api.js';
import { usePoll } from '../hooks.js';
import { parseMetrics } from '../prometheus.js';

// Why each route overflowed (hone_route_overflow_total{route, reason}).
function overflowReasons(text) {
  const by = {};
  for (const s of parseMetrics(text)) {
    if (s.name !== 'hone_route_overflow_total' || !s.value) continue;
    (by[s.labels.route] ||= []).push(`${s.labels.reason} ${s.value}`);
  }
  return by;
}

const pct = (x) => (100 * (x || 0)).toFixed(1) + '%';

function Keys({ keys }) {
  if (!keys?.length) return '–';
  return keys.map((k) => (
    <span class={'badge key-' + k.health} title={k.why || ''}>
      {k.fingerprint} {k.health}
      {k.available_in_s != null ? ` (${k.available_in_s.toFixed(0)} s)` : ''}
    </span>
  ));
}

function Target({ t }) {
  return (
    <tr data-target={t.target}>
      <td>{t.target}</td>
      <td>{t.local ? 'local' : t.base_url}</td>
      <td>
        {t.local ? '–' : (
          <span class={'badge breaker-' + t.breaker} data-testid="breaker" data-breaker={t.breaker}>
            {t.breaker}
            {t.breaker !== 'closed' && t.breaker_retry_after_s ? ` · retry in ${t.breaker_retry_after_s.toFixed(0)} s` : ''}
          </span>
        )}
      </td>
      <td>{t.local ? '–' : `${t.in_flight}${t.max_concurrent ? ' / ' + t.max_concurrent : ''}`}</td>
      <td>{t.local ? '–' : <Keys keys={t.keys} />}</td>
      <td>{t.key_queue?.waiting ? t.key_queue.waiting + ' waiting' : '–'}</td>
    </tr>
  );
}

export function RoutesView() {
  const { data, error } = usePoll(async () => {
    const [routes, text] = await Promise.all([api('/hone/routes'), api('/metrics')]);
    return { ...routes, reasons: overflowReasons(text) };
  }, 2000);
  if (error && !data) return <div class="error">{error.message}</div>;
  if (!data) return <p class="muted">Loading…</p>;
  if (!data.routes.length) return <p class="muted">This server routes nothing: no [[route]] in its config.</p>;
  return (
    <section>
      <h2>Routes</h2>
      <p>Overflow to other targets: <b data-testid="overflow-share">{pct(data.overflow_rate)}</b> of routed requests.</p>
      {data.routes.map((r) => (
        <div class="card" data-route={r.name}>
          <h3>
            {r.name} <span class="muted">{r.policy}</span>
          </h3>
          <p>
            {r.requests} requests · {pct(r.overflow_rate)} overflowed
            {data.reasons[r.name] ? <span data-testid="overflow-reasons"> ({data.reasons[r.name].join(', ')})</span> : ''} · response cache {r.cache.mode}
            {r.cache.enabled ? `, hit rate ${pct(r.cache.hit_rate)}` : ''}
            {r.ttft_slo_s ? ` · TTFT SLO ${r.ttft_slo_s} s` : ''}
          </p>
          <table>
            <thead>
              <tr><th>Target</th><th>Where</th><th>Breaker</th><th>In flight</th><th>Keys</th><th>Key queue</th></tr>
            </thead>
            <tbody>
              {r.targets.map((t) => (
                <Target t={t} />
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}
