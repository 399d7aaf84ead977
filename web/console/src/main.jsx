// hone's web console: a chat playground and an operator view of the server
// that serves it. Every view reads the server's own endpoints.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, keys, onAuthNeeded } from './api.js';
import { ChatView } from './views/chat.jsx';
import { ModelsView } from './views/models.jsx';
import { RoutesView } from './views/routes.jsx';
import { SpendView } from './views/spend.jsx';
import { CanaryView } from './views/canary.jsx';
import { MetricsView } from './views/metrics.jsx';
import './style.css';

const VIEWS = [
  ['chat', 'Chat', ChatView],
  ['models', 'Models', ModelsView],
  ['routes', 'Routes', RoutesView],
  ['spend', 'Spend', SpendView],
  ['canaries', 'Canaries', CanaryView],
  ['metrics', 'Metrics', MetricsView],
];

function currentView() {
  const name = location.hash.replace('#', '');
  return VIEWS.some(([n]) => n === name) ? name : 'chat';
}

// Asks for the keys: the API key the server wants, and an admin key for
// load/unload, spend and canary actions where the server has admin keys.
function KeyForm({ reason, onDone }) {
  const [apiKey, setApiKey] = useState('');
  const [adminKey, setAdminKey] = useState(keys.admin());
  const submit = (e) => {
    e.preventDefault();
    keys.setApi(apiKey.trim());
    keys.setAdmin(adminKey.trim());
    onDone();
  };
  return (
    <form class="keyform" onSubmit={submit} data-testid="key-form">
      <h2>This server needs an API key</h2>
      <p class="muted">{reason}</p>
      <label>
        API key
        <input type="password" name="api-key" autocomplete="off" value={apiKey} onInput={(e) => setApiKey(e.target.value)} />
      </label>
      <label>
        Admin key (optional: load and unload, spend, canary actions)
        <input type="password" name="admin-key" autocomplete="off" value={adminKey} onInput={(e) => setAdminKey(e.target.value)} />
      </label>
      <p class="muted">Kept in this tab's session storage until the tab closes; sent only to this server.</p>
      <button type="submit">Continue</button>
    </form>
  );
}

function App() {
  const [view, setView] = useState(currentView());
  const [gate, setGate] = useState({ state: 'checking', reason: '' });
  const check = async () => {
    try {
      await api('/v1/models');
      setGate({ state: 'open', reason: '' });
    } catch (e) {
      setGate(e.status === 401 ? { state: 'key', reason: e.message } : { state: 'open', reason: '' });
    }
  };
  useEffect(() => {
    check();
    const off = onAuthNeeded(() => setGate({ state: 'key', reason: 'The server refused the key (401).' }));
    const onHash = () => setView(currentView());
    window.addEventListener('hashchange', onHash);
    return () => {
      off();
      window.removeEventListener('hashchange', onHash);
    };
  }, []);
  const signOut = () => {
    keys.setApi('');
    keys.setAdmin('');
    check();
  };
  const View = VIEWS.find(([n]) => n === view)[2];
  return (
    <div class="shell">
      <header>
        <span class="brand">hone</span>
        <nav>
          {VIEWS.map(([name, label]) => (
            <a href={'#' + name} class={name === view ? 'active' : ''} data-view={name}>
              {label}
            </a>
          ))}
        </nav>
        <button class="link" onClick={signOut} title="Forget the keys kept in this tab">
          Keys
        </button>
      </header>
      <main>
        {gate.state === 'checking' && <p class="muted">Connecting…</p>}
        {gate.state === 'key' && <KeyForm reason={gate.reason} onDone={check} />}
        {gate.state === 'open' && <View />}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app'));
