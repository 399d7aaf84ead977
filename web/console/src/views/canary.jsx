// Canaries: each route's canary step, both arms' TTFT P99 and error rate over
// the window, the decisions seen while this page was open; promote and roll
// back for admins.
import { useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { usePoll } from '../hooks.js';

const ms = (s) => (s == null ? '–' : (1000 * s).toFixed(0) + ' ms');

function Arm({ name, w }) {
  return (
    <tr>
      <td>{name}</td><td>{w.requests}</td><td>{ms(w.ttft_p99_s)}</td><td>{ms(w.total_p99_s)}</td>
      <td>{(100 * w.error_rate).toFixed(1)}%</td>
    </tr>
  );
}

export function CanaryView() {
  const seen = useRef({});
  const [log, setLog] = useState([]);
  const [note, setNote] = useState('');
  const { data, error, reload } = usePoll(async () => {
    const routes = (await api('/hone/routes')).routes.filter((r) => r.canary);
    // The decision log: every change of state or step, as this page saw it.
    const added = [];
    for (const r of routes) {
      const c = r.canary;
      const key = `${c.state}|${c.step}`;
      if (seen.current[r.name] !== key) {
        if (seen.current[r.name] !== undefined || c.state !== 'shadow' || c.step)
          added.push({ at: new Date().toLocaleTimeString(), route: r.name, state: c.state, percent: c.percent, reason: c.reason });
        seen.current[r.name] = key;
      }
    }
    if (added.length) setLog((l) => [...added.reverse(), ...l].slice(0, 50));
    return routes;
  }, 2000);
  const act = async (route, action) => {
    setNote('');
    try {
      const r = await api('/hone/routes/canary', { method: 'POST', body: { route, action }, admin: true });
      setNote(`${action}: ${r.state || 'done'}`);
    } catch (e) {
      setNote(e.message);
    }
    reload();
  };
  if (error && !data) return <div class="error">{error.message}</div>;
  if (!data) return <p class="muted">Loading…</p>;
  return (
    <section>
      <h2>Canaries</h2>
      {note && <p class="note">{note}</p>}
      {!data.length && <p class="muted">No route has a canary.</p>}
      {data.map((r) => {
        const c = r.canary;
        return (
          <div class="card" data-canary={r.name}>
            <h3>
              {r.name} → {c.target}{' '}
              <span class={'badge canary-' + c.state} data-testid="canary-state" data-state={c.state}>
                {c.state}
              </span>
            </h3>
            <p data-testid="canary-step" data-percent={c.percent}>
              {c.state === 'shadow' ? `shadowing ${c.shadow_percent}%` : `${c.percent}% of new conversations`} · step {c.step + 1} of{' '}
              {c.steps.length} ({c.steps.join('% → ')}%) · held {c.step_age_s.toFixed(0)} s of {c.hold_s} s
            </p>
            {c.reason && <p class="muted">last decision: {c.reason}</p>}
            <table>
              <thead>
                <tr><th>Arm</th><th>Requests</th><th>TTFT P99</th><th>Total P99</th><th>Errors</th></tr>
              </thead>
              <tbody>
                <Arm name="candidate" w={c.candidate} />
                <Arm name="baseline" w={c.baseline} />
              </tbody>
            </table>
            <p class="muted">
              Limits: P99 at most {c.max_p99_ratio}× the baseline, errors at most {(100 * c.max_error_rate).toFixed(1)}%, {c.min_requests} requests a window.
            </p>
            <button onClick={() => act(r.name, 'promote')}>Promote</button>{' '}
            <button onClick={() => act(r.name, 'rollback')}>Roll back</button>
          </div>
        );
      })}
      <div class="card">
        <h3>Decisions seen</h3>
        <ul data-testid="canary-log">
          {log.map((e) => (
            <li>{e.at} · {e.route}: {e.state} {e.percent}% {e.reason ? '— ' + e.reason : ''}</li>
          ))}
        </ul>
      </div>
    </section>
  );
}
