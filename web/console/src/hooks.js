import { useEffect, useRef, useState } from 'preact/hooks';

// Calls `load` now and every `ms` while the view is shown; a slow answer is
// never overlapped by the next call. Returns { data, error, at, reload }.
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ data: null, error: null, at: 0 });
  const tick = useRef(() => {});
  const latest = useRef(load);
  latest.current = load;  // the newest closure, without restarting the timer
  useEffect(() => {
    let stopped = false;
    let timer;
    let running = false;
    let again = false;  // a reload asked for while a poll ran: one more after it
    const run = async () => {
      clearTimeout(timer);
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        const data = await latest.current();
        if (!stopped) setState({ data, error: null, at: Date.now() });
      } catch (e) {
        if (!stopped) setState((s) => ({ ...s, error: e, at: Date.now() }));
      }
      running = false;
      if (stopped) return;
      if (again) {
        again = false;
        run();
      } else {
        timer = setTimeout(run, ms);
      }
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
