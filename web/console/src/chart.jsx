import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

// A uPlot chart: `series` is [{label, stroke}], `data` is [xs, ys1, ys2, ...]
// (x in seconds since the epoch, or category indexes with `bars`).
export function Chart({ title, series, data, height = 180, bars = false, xLabels, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const width = Math.max(280, box.current.clientWidth || 480);
    const opts = {
      title,
      width,
      height,
      // Bars: one category per x, half a slot of room on each side, a tick per bar.
      scales: { x: bars ? { time: false, auto: false, range: [-0.5, (xLabels?.length || 1) - 0.5] } : { time: true } },
      axes: [
        bars && xLabels
          ? { splits: () => xLabels.map((_, i) => i), values: (u, ticks) => ticks.map((t) => xLabels[t] ?? '') }
          : {},
        {},
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.stroke,
          fill: bars ? s.stroke + '88' : undefined,
          width: 2,
          spanGaps: true,  // a window with no requests has no TTFT or hit rate
          paths: bars ? uPlot.paths.bars({ size: [0.6, 60] }) : undefined,
          points: { show: bars ? false : undefined },
        })),
      ],
    };
    plot.current = new uPlot(opts, data, box.current);
    const resize = () => plot.current.setSize({ width: Math.max(280, box.current.clientWidth), height });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.current.destroy();
    };
  }, [series.length, bars, (xLabels || []).join('|')]);
  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);
  // The newest value of the first series, for tests and for a glance.
  const ys = data[1] || [];
  let last = null;
  for (let i = ys.length - 1; i >= 0 && last == null; --i) last = ys[i];
  return <div class="chart" ref={box} data-testid={testid} data-points={ys.length} data-last={last ?? ''} />;
}
