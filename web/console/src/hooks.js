import { useEffect, useRef, useState } from 'preact/hooks';

// Calls `load` now and every `ms` while the view is shown; a slow answer is
// never overlapped by the next call. Returns { data, error, at, reload }.
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ data: null, error: null, at: 0 });
  const tick = useRef(() => {});
  useEffect(() => {
    let stopped = false;
    let timer;
    const run = async () => {
      clearTimeout(timer);
      try {
        const data = await load();
        if (!stopped) setState({ data, error: null, at: Date.now() });
      } catch (e) {
        if (!stopped) setState((s) => ({ ...s, error: e, at: Date.now() }));
      }
      if (!stopped) timer = setTimeout(run, ms);
    };
    tick.current = run;
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
  return { ...state, reload: () => tick.current() };
}
