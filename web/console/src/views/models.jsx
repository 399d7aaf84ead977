// Models: what is loaded, pinned, its memory, busy slots and queue, decode
// and prefill rates (from /metrics), and load/unload for admins.
import { useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { usePoll } from '../hooks.js';
import { parseMetrics, sum } from '../prometheus.js';

const GiB = 1024 ** 3;

async function snapshot() {
  const [list, ps, text, routes] = await Promise.all([api('/v1/models'), api('/api/ps'), api('/metrics'), api('/hone/routes')]);
  // /v1/models lists routes too (clients name them as models): those are in the Routes view.
  const routed = new Set(routes.routes.map((r) => r.name));
  const names = list.data.map((m) => m.id).filter((n) => !routed.has(n));
  return { names, loaded: ps.models, metrics: parseMetrics(text), at: Date.now() };
}

export function ModelsView() {
  const last = useRef(null);
  const rates = useRef({});
  const [note, setNote] = useState('');
  const { data, error, reload } = usePoll(async () => {
    const s = await snapshot();
    // Decode rate: generated tokens between two polls, per model.
    const prev = last.current;
    for (const name of s.names) {
      const of = (snap) => sum(snap.metrics, 'hone_generation_tokens_total', (l) => l.model_name === name);
      // A counter that went down (a restart, an unload) starts over: no rate.
      const dt = (s.at - prev?.at) / 1000;
      if (prev && dt > 0.5) rates.current[name] = of(s) >= of(prev) ? (of(s) - of(prev)) / dt : null;
    }
    last.current = s;
    return s;
  }, 3000);

  const act = async (path, model) => {
    setNote('');
    try {
      await api(path, { method: 'POST', body: { model }, admin: true });
      setNote(`${path.endsWith('unload') ? 'unloaded' : 'loaded'} ${model}`);
    } catch (e) {
      setNote(e.message);
    }
    reload();
  };

  if (error && !data) return <div class="error">{error.message}</div>;
  if (!data) return <p class="muted">Loading…</p>;
  const metric = (name, model) => sum(data.metrics, name, (l) => l.model_name === model);
  return (
    <section>
      <h2>Models</h2>
      {note && <p class="note">{note}</p>}
      <table data-testid="models-table">
        <thead>
          <tr>
            <th>Model</th><th>State</th><th>Memory</th><th>Slots busy</th><th>Queue</th><th>KV used</th>
            <th>Decode tok/s</th><th>Prefill tok/s</th><th>Context/slot</th><th>Tuned profile</th><th />
          </tr>
        </thead>
        <tbody>
          {data.names.map((name) => {
            const l = data.loaded.find((m) => m.name === name);
            return (
              <tr data-model={name}>
                <td>{name}</td>
                <td>{l ? (l.pinned ? 'loaded, pinned' : 'loaded') : 'not loaded'}</td>
                <td>{l ? (l.size / GiB).toFixed(2) + ' GiB' : '–'}</td>
                <td>{l ? `${metric('hone_num_requests_running', name)} of ${l.slots}` : '–'}</td>
                <td>{l ? metric('hone_num_requests_waiting', name) : '–'}</td>
                <td>{l ? (100 * metric('hone_kv_cache_usage_perc', name)).toFixed(1) + '%' : '–'}</td>
                <td>{rates.current[name] != null && l ? rates.current[name].toFixed(1) : '–'}</td>
                <td>{l ? metric('hone_prefill_tokens_per_second', name).toFixed(1) : '–'}</td>
                <td>{l ? l.context_length : '–'}</td>
                <td data-testid="profile">{l ? l.profile || 'none (defaults)' : '–'}</td>
                <td>
                  {l ? (
                    <button onClick={() => act('/hone/unload', name)}>Unload</button>
                  ) : (
                    <button onClick={() => act('/hone/load', name)}>Load</button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <p class="muted">Load and unload need an admin key where the server has admin keys.</p>
    </section>
  );
}
