// The chat playground: a model or route, a system prompt and sampling
// settings; answers stream through the OpenAI chat API, each with its TTFT,
// tokens/s, the target that answered and the prompt tokens the cache held.
// The conversation stays in this browser (localStorage), nowhere else.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, streamChat } from '../api.js';

const STORE = 'hone.chat';

function loadSaved() {
  try {
    return JSON.parse(localStorage.getItem(STORE)) || {};
  } catch {
    return {};
  }
}

// "route=support target=openai:gpt-4o attempts=1 overflow=queue" -> parts.
function parseRouteNote(note) {
  const out = {};
  for (const part of (note || '').split(' ')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}

// Who answered, from the route's note: the response cache, the target that
// took over mid-stream, or the target.
function targetOf(note) {
  if (note.cache === 'hit') return 'response cache';
  if (note.continued_on) return `${note.continued_on} (after ${note.after || note.target})`;
  return note.target || 'local';
}

function Stats({ s }) {
  if (!s) return null;
  const fmt = (x, d = 2) => (x == null ? '–' : x.toFixed(d));
  return (
    <div class="stats" data-testid="answer-stats">
      <span>TTFT {s.ttft == null ? '–' : fmt(s.ttft * 1000, 0) + ' ms'}</span>
      <span>{fmt(s.tps, 1)} tok/s</span>
      <span>{s.completion ?? '–'} tokens</span>
      <span data-testid="answer-target">{s.target ?? '–'}</span>
      <span>cached {s.cached ?? 0} of {s.prompt ?? '–'} prompt tokens</span>
      {s.finish && <span>finish: {s.finish}</span>}
    </div>
  );
}

function ToolCalls({ calls }) {
  if (!calls?.length) return null;
  return calls.map((c) => (
    <div class="toolcall" data-testid="tool-call">
      <b>call</b> <code>{c.name}</code>(<code>{c.arguments}</code>)
    </div>
  ));
}

function Message({ m }) {
  return (
    <div class={'msg ' + m.role} data-role={m.role}>
      <div class="who">{m.role}</div>
      <div class="text">{m.content}</div>
      <ToolCalls calls={m.tool_calls} />
      {m.error && <div class="error">{m.error}</div>}
      <Stats s={m.stats} />
    </div>
  );
}

// Folds one streamed chunk into the answer being built.
function applyChunk(answer, chunk, t) {
  const choice = chunk.choices?.[0];
  const delta = choice?.delta || {};
  if ((delta.content || delta.tool_calls) && t.first == null) t.first = performance.now();
  if (delta.content) answer.content += delta.content;
  for (const d of delta.tool_calls || []) {
    const c = (answer.tool_calls[d.index] ||= { name: '', arguments: '' });
    if (d.function?.name) c.name = d.function.name;
    if (d.function?.arguments) c.arguments += d.function.arguments;
  }
  if (choice?.finish_reason) answer.stats.finish = choice.finish_reason;
  if (chunk.hone_route) answer.stats.target = targetOf(parseRouteNote(chunk.hone_route));
  if (chunk.usage) {
    answer.stats.prompt = chunk.usage.prompt_tokens;
    answer.stats.completion = chunk.usage.completion_tokens;
    answer.stats.cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
  }
}

function Settings({ models, s, set }) {
  return (
    <aside class="settings">
      <label>
        Model or route
        <select value={s.model} onChange={(e) => set({ model: e.target.value })} data-testid="model-select">
          {models.map((m) => (
            <option value={m}>{m}</option>
          ))}
        </select>
      </label>
      <label>
        System prompt
        <textarea rows="4" value={s.system} onInput={(e) => set({ system: e.target.value })} />
      </label>
      <label>
        Temperature <input type="number" step="0.1" min="0" max="2" value={s.temperature} onInput={(e) => set({ temperature: Number(e.target.value) })} />
      </label>
      <label>
        Top p <input type="number" step="0.05" min="0" max="1" value={s.top_p} onInput={(e) => set({ top_p: Number(e.target.value) })} />
      </label>
      <label>
        Max tokens <input type="number" min="1" value={s.max_tokens} onInput={(e) => set({ max_tokens: Number(e.target.value) })} />
      </label>
    </aside>
  );
}

export function ChatView() {
  const [saved] = useState(loadSaved);
  const [models, setModels] = useState([]);
  const [settings, setSettings] = useState({ model: '', system: '', temperature: 0.7, top_p: 1, max_tokens: 256, ...saved.settings });
  const [messages, setMessages] = useState(saved.messages || []);
  const [input, setInput] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const abort = useRef(null);
  const set = (patch) => setSettings((s) => ({ ...s, ...patch }));

  useEffect(() => {
    api('/v1/models')
      .then((j) => {
        const names = j.data.map((m) => m.id);
        setModels(names);
        if (!names.includes(settings.model) && names.length) set({ model: names[0] });
      })
      .catch((e) => setError(e.message));
  }, []);
  useEffect(() => {
    if (busy) return;  // saved once the answer is whole, not on every chunk
    localStorage.setItem(STORE, JSON.stringify({ settings, messages: messages.filter((m) => !m.streaming) }));
  }, [settings, messages, busy]);
  // Leaving the view stops a running answer (the server stops generating).
  useEffect(() => () => abort.current?.abort(), []);

  const ask = async (history) => {
    setError('');
    setBusy(true);
    const controller = new AbortController();
    abort.current = controller;
    const answer = { role: 'assistant', content: '', tool_calls: [], stats: { target: null }, streaming: true };
    const t = { start: performance.now(), first: null };
    const show = () => setMessages([...history, { ...answer, stats: { ...answer.stats } }]);
    show();
    const body = {
      model: settings.model,
      messages: [...(settings.system ? [{ role: 'system', content: settings.system }] : []), ...history.map(({ role, content }) => ({ role, content }))],
      temperature: settings.temperature,
      top_p: settings.top_p,
      ...(settings.max_tokens > 0 ? { max_tokens: settings.max_tokens } : {}),
      stream_options: { include_usage: true, include_route: true },
    };
    try {
      await streamChat(body, (chunk) => {
        applyChunk(answer, chunk, t);
        show();
      }, controller.signal);
    } catch (e) {
      if (e.name === 'AbortError') answer.stats.finish = 'stopped';
      else answer.error = e.message;
    }
    // No route named in the stream: the server's own model answered.
    if (!answer.error && answer.stats.target == null) answer.stats.target = 'local';
    const end = performance.now();
    answer.stats.ttft = t.first == null ? null : (t.first - t.start) / 1000;
    const gen = t.first == null ? 0 : (end - t.first) / 1000;
    const n = answer.stats.completion;
    answer.stats.tps = n > 1 && gen > 0 ? (n - 1) / gen : null;
    answer.streaming = false;
    setMessages([...history, answer]);
    setBusy(false);
    abort.current = null;
  };

  const send = (e) => {
    e.preventDefault();
    if (!input.trim() || busy) return;
    const history = [...messages, { role: 'user', content: input }];
    setInput('');
    ask(history);
  };
  const regenerate = () => {
    const last = messages.length - 1;
    if (busy || last < 0) return;
    ask(messages[last].role === 'assistant' ? messages.slice(0, last) : messages);
  };

  return (
    <div class="chat">
      <Settings models={models} s={settings} set={set} />
      <section class="conversation">
        <div class="messages" data-testid="messages">
          {messages.length === 0 && <p class="muted">Ask something. The conversation stays in this browser.</p>}
          {messages.map((m) => (
            <Message m={m} />
          ))}
        </div>
        {error && <div class="error">{error}</div>}
        <form class="composer" onSubmit={send}>
          <textarea rows="3" placeholder="Message" value={input} onInput={(e) => setInput(e.target.value)} data-testid="prompt"
            onKeyDown={(e) => e.key === 'Enter' && !e.shiftKey && !e.isComposing && send(e)} />
          <div class="buttons">
            {busy ? (
              <button type="button" onClick={() => abort.current?.abort()} data-testid="stop">Stop</button>
            ) : (
              <button type="submit" data-testid="send">Send</button>
            )}
            <button type="button" onClick={regenerate} disabled={busy || !messages.length} data-testid="regenerate">Regenerate</button>
            <button type="button" onClick={() => setMessages([])} disabled={busy}>New chat</button>
          </div>
        </form>
      </section>
    </div>
  );
}
