// The control plane's API as the dashboard uses it (docs/api.md): the token kept in
// sessionStorage, JSON calls with `Authorization: Bearer`, and the server-sent event stream read
// through fetch (EventSource cannot send a header), resumed after a cut with the last event id.

const TOKEN_KEY = 'tessera.token';

// `/ui/#token=...`: taken from the fragment (never sent to the server), kept, then removed from
// the address bar so that it does not end up in bookmarks or screenshots.
export function takeTokenFromFragment() {
  const m = /(?:^#|[#&])token=([^&]+)/.exec(window.location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, '', window.location.pathname + window.location.search + '#/cluster');
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || '',
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t.trim()),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function get(path) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${token.get()}` } });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const e = body && body.error ? body.error : { code: 'http_' + res.status, message: text };
    throw new ApiError(res.status, e.code, e.message);
  }
  return body;
}

// Every page of a list (`continue` tokens), up to `max` items.
export async function getAll(path, key, max = 5000) {
  const out = [];
  let next = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await get(path + sep + 'limit=1000' + (next ? '&continue=' + encodeURIComponent(next) : ''));
    out.push(...(page[key] || []));
    next = page.continue;
  } while (next && out.length < max);
  return out;
}

// Reads GET /v1/events until stopped; calls onEvent(event) for each and onState('live' |
// 'reconnecting' | 'denied'). Starts at the newest event; after a cut, resumes after the last one
// seen, as EventSource would (`after=` instead of Last-Event-ID).
export function streamEvents(onEvent, onState) {
  const abort = new AbortController();
  let last = null;
  let stopped = false;
  async function once() {
    const q = last === null ? '' : `?after=${last}`;
    const res = await fetch('/v1/events' + q, {
      headers: { Authorization: `Bearer ${token.get()}`, Accept: 'text/event-stream' },
      signal: abort.signal,
    });
    if (res.status === 401 || res.status === 403) {
      onState('denied');
      stopped = true;
      return;
    }
    if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
    onState('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let id = null;
        let data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) id = line.slice(3).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        }
        if (id !== null) last = id;
        if (data) {
          try {
            onEvent(JSON.parse(data));
          } catch {
            /* a malformed event is skipped; the next refresh shows the truth anyway */
          }
        }
      }
    }
  }
  (async () => {
    while (!stopped) {
      try {
        await once();
      } catch {
        if (stopped || abort.signal.aborted) return;
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((r) => setTimeout(r, 3000));
    }
  })();
  return () => {
    stopped = true;
    abort.abort();
  };
}
