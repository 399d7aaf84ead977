// Spend: month to date by day (chart), by upstream, route and tenant; each
// budget against its cap and thresholds; the alerts that fired (/metrics).
import { api } from '../api.js';
import { Chart } from '../chart.jsx';
import { usePoll } from '../hooks.js';
import { parseMetrics } from '../prometheus.js';

const money = (x) => '$' + (x || 0).toFixed(4);

const COLORS = { upstream: '#0891b2', route: '#7c3aed', tenant: '#db2777' };

function Group({ title, rows, kind }) {
  if (!rows?.length) return null;
  return (
    <div class="card">
      <h3>{title}</h3>
      <Chart title={`Cost by ${kind}`} bars height={150} testid={`spend-by-${kind}`} xLabels={rows.map((r) => r.key || '(no key)')}
        series={[{ label: 'cost ($)', stroke: COLORS[kind] }]} data={[rows.map((_, i) => i), rows.map((r) => r.cost)]} />
      <table>
        <thead>
          <tr><th /><th>Requests</th><th>Prompt tokens</th><th>Completion tokens</th><th>Cost</th></tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr>
              <td>{r.key}</td><td>{r.requests}</td><td>{r.prompt_tokens}</td><td>{r.completion_tokens}</td>
              <td>{money(r.cost)}{r.estimated ? ' (estimated)' : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function BudgetBar({ name, window, w }) {
  if (!w) return null;
  const share = Math.min(1, w.share);
  return (
    <div class="budget" data-budget={name} data-window={window} data-share={w.share.toFixed(6)}>
      <div class="budget-label">
        {name} · {w.period}: {money(w.spent)} of {money(w.cap)} ({(100 * w.share).toFixed(1)}%)
        {w.reserved ? `, ${money(w.reserved)} reserved` : ''}
        {w.exhausted ? ' · exhausted' : ''}
      </div>
      <div class="bar">
        <div class={'fill' + (w.exhausted ? ' over' : '')} style={{ width: (100 * share).toFixed(2) + '%' }} />
      </div>
    </div>
  );
}

export function SpendView() {
  const { data, error } = usePoll(async () => {
    const [spend, text] = await Promise.all([api('/hone/spend', { admin: true }), api('/metrics')]);
    const alerts = parseMetrics(text).filter((s) => s.name === 'hone_budget_alerts_total' && s.value > 0);
    return { spend, alerts };
  }, 3000);
  if (error && !data) return <div class="error">{error.message}</div>;
  if (!data) return <p class="muted">Loading…</p>;
  const s = data.spend;
  const days = s.by_day || [];
  return (
    <section>
      <h2>Spend, {s.month}</h2>
      {s.error && <div class="error">The ledger could not be read: {s.error}</div>}
      <p>
        Month to date: <b data-testid="spend-total">{money(s.total?.cost)}</b> over {s.total?.requests ?? 0} requests
        {s.total?.estimated ? ' (some estimated)' : ''} · ledger: {s.ledger}
      </p>
      <div class="card">
        <h3>Budgets</h3>
        {!s.budgets.length && <p class="muted">No budgets configured.</p>}
        {s.budgets.map((b) => (
          <div>
            <BudgetBar name={b.name} window="monthly" w={b.monthly} />
            <BudgetBar name={b.name} window="daily" w={b.daily} />
            <span class="muted">scope {b.scope}; alerts at {b.thresholds.map((t) => Math.round(t * 100) + '%').join(', ')}</span>
          </div>
        ))}
      </div>
      {days.length > 0 && (
        <div class="card">
          <Chart title="Cost by day" bars testid="spend-by-day" xLabels={days.map((d) => d.key)}
            series={[{ label: 'cost ($)', stroke: '#3b82f6' }]} data={[days.map((_, i) => i), days.map((d) => d.cost)]} />
        </div>
      )}
      <div class="card">
        <h3>Alerts fired since the server started</h3>
        {!data.alerts.length && <p class="muted">None.</p>}
        <ul>
          {data.alerts.map((a) => (
            <li>{a.labels.budget} {a.labels.window} crossed {a.labels.threshold}: {a.value}×</li>
          ))}
        </ul>
      </div>
      <Group title="By upstream" kind="upstream" rows={s.by_upstream} />
      <Group title="By route" kind="route" rows={s.by_route} />
      <Group title="By tenant (key fingerprint)" kind="tenant" rows={s.by_tenant} />
    </section>
  );
}
