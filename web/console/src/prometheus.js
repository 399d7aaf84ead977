// Reads Prometheus' text format (what /metrics writes) into samples, and sums
// or picks series from them. Enough for hone's own exposition: no escapes
// inside label values beyond \" and \\.
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3]))) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    }
    samples.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return samples;
}

export function sum(samples, name, where = () => true) {
  let total = 0;
  for (const s of samples) if (s.name === name && where(s.labels)) total += s.value;
  return total;
}

// The q-quantile of a histogram from two snapshots' cumulative buckets (the
// requests between them), summed over every series of the family.
export function quantileBetween(before, after, family, q) {
  const buckets = (samples) => {
    const by = new Map();
    for (const s of samples) {
      if (s.name !== family + '_bucket') continue;
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      by.set(le, (by.get(le) || 0) + s.value);
    }
    return by;
  };
  const a = buckets(after);
  const b = before ? buckets(before) : new Map();
  const bounds = [...a.keys()].sort((x, y) => x - y);
  const counts = bounds.map((le) => a.get(le) - (b.get(le) || 0));
  const total = counts[counts.length - 1] || 0;
  if (!total) return null;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i] < rank) continue;
    // Linear within the bucket, as Prometheus' histogram_quantile does.
    const lo = i ? bounds[i - 1] : 0;
    const hi = bounds[i];
    if (hi === Infinity) return lo;
    const below = i ? counts[i - 1] : 0;
    const inBucket = counts[i] - below;
    return inBucket ? lo + ((hi - lo) * (rank - below)) / inBucket : hi;
  }
  return null;
}
