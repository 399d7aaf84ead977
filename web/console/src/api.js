// Talks to the server that serves the page, through the same endpoints any
// client uses. The keys live in sessionStorage (this tab, until it closes),
// never in a URL or localStorage.
const API_KEY = 'hone.apiKey';
const ADMIN_KEY = 'hone.adminKey';

export const keys = {
  api: () => sessionStorage.getItem(API_KEY) || '',
  admin: () => sessionStorage.getItem(ADMIN_KEY) || '',
  setApi(k) {
    if (k) sessionStorage.setItem(API_KEY, k);
    else sessionStorage.removeItem(API_KEY);
  },
  setAdmin(k) {
    if (k) sessionStorage.setItem(ADMIN_KEY, k);
    else sessionStorage.removeItem(ADMIN_KEY);
  },
};

// Who listens for "the server wants a key" (the key gate).
const authListeners = new Set();
export function onAuthNeeded(fn) {
  authListeners.add(fn);
  return () => authListeners.delete(fn);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(admin, json) {
  const h = {};
  const k = admin ? keys.admin() || keys.api() : keys.api();
  if (k) h.Authorization = 'Bearer ' + k;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

async function failure(res) {
  const text = await res.text();
  let message = text;
  try {
    const j = JSON.parse(text);
    message = j.error?.message || j.error || text;
  } catch {
    /* not JSON: the text is the message */
  }
  if (res.status === 401) for (const fn of authListeners) fn();
  return new ApiError(res.status, `${res.status}: ${message}`);
}

// GET or POST a JSON endpoint; `admin` sends the admin key where one is set.
export async function api(path, { method = 'GET', body, admin = false, signal } = {}) {
  const res = await fetch(path, {
    method,
    headers: headers(admin, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  if (!res.ok) throw await failure(res);
  const type = res.headers.get('Content-Type') || '';
  return type.includes('json') ? res.json() : res.text();
}

// Streams a chat completion: calls onChunk with each parsed event's JSON,
// resolves when the stream ends ([DONE] or the connection closes).
export async function streamChat(body, onChunk, signal) {
  const res = await fetch('/v1/chat/completions', {
    method: 'POST',
    headers: headers(false, true),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  // One event: its data lines joined by newlines (the SSE rule); true at [DONE].
  const dispatch = (event) => {
    const data = event
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
      .join('\n');
    if (!data) return false;
    if (data.trim() === '[DONE]') return true;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ApiError(0, chunk.error.message || 'the stream failed');
    onChunk(chunk);
    return false;
  };
  for (;;) {
    const { value, done } = await reader.read();
    buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
    buffered = buffered.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (dispatch(event)) return;
    }
    if (done) {
      dispatch(buffered);  // a last event without its blank line
      return;
    }
  }
}
