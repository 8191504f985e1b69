/**
 * Inline-SVG charts for the replay reports (no scripts, no external assets): a line chart over hours and a
 * grouped bar chart. Values that are null or not finite leave a gap. Text is escaped.
 */

/** One line or bar group. */
export interface Series {
  name: string;
  values: (number | null)[];
}

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"];

/** HTML-escapes text. */
export function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function fmt(v: number): string {
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

/** A line chart: x = index (hours), y linear or log10. */
export function lineChart(title: string, series: Series[], opts: { yLabel: string; log?: boolean; width?: number; height?: number } = { yLabel: "" }): string {
  const W = opts.width ?? 900;
  const H = opts.height ?? 260;
  const L = 60, R = 150, T = 28, B = 34;
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const tf = (v: number) => (opts.log ? Math.log10(Math.max(v, 1)) : v);
  const finite = series.flatMap((s) => s.values.filter((v): v is number => v !== null && Number.isFinite(v))).map(tf);
  let lo = opts.log ? Math.min(...finite, 0) : 0;
  let hi = Math.max(...finite, lo + 1);
  if (!Number.isFinite(lo)) lo = 0;
  if (!Number.isFinite(hi)) hi = 1;
  const x = (i: number) => L + ((W - L - R) * i) / Math.max(1, n - 1);
  const y = (v: number) => T + (H - T - B) * (1 - (tf(v) - lo) / (hi - lo || 1));
  const parts: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">`, `<text x="${L}" y="18" font-size="14" font-weight="bold">${esc(title)}</text>`];
  for (let k = 0; k <= 4; k++) {
    const v = lo + ((hi - lo) * k) / 4;
    const yy = T + (H - T - B) * (1 - k / 4);
    const label = opts.log ? fmt(Math.pow(10, v)) : fmt(v);
    parts.push(`<line x1="${L}" y1="${yy}" x2="${W - R}" y2="${yy}" stroke="#ddd"/><text x="${L - 6}" y="${yy + 4}" font-size="10" text-anchor="end">${label}</text>`);
  }
  for (let d = 0; d < n; d += 24) parts.push(`<line x1="${x(d)}" y1="${T}" x2="${x(d)}" y2="${H - B}" stroke="#eee"/><text x="${x(d)}" y="${H - B + 14}" font-size="10" text-anchor="middle">${d}h</text>`);
  parts.push(`<text x="${L}" y="${H - 4}" font-size="10">hour of the run; y: ${esc(opts.yLabel)}${opts.log ? " (log)" : ""}</text>`);
  series.forEach((s, si) => {
    const c = COLORS[si % COLORS.length]!;
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    parts.push(`<path d="${d}" fill="none" stroke="${c}" stroke-width="1.5"/>`);
    parts.push(`<rect x="${W - R + 10}" y="${T + si * 16}" width="10" height="10" fill="${c}"/><text x="${W - R + 24}" y="${T + si * 16 + 9}" font-size="11">${esc(s.name)}</text>`);
  });
  parts.push("</svg>");
  return parts.join("");
}

/** Grouped bars: one group per category, one bar per series. */
export function barChart(title: string, categories: string[], series: Series[], opts: { yLabel: string; width?: number; height?: number } = { yLabel: "" }): string {
  const W = opts.width ?? 900;
  const H = opts.height ?? 240;
  const L = 60, R = 150, T = 28, B = 40;
  const hi = Math.max(1, ...series.flatMap((s) => s.values.filter((v): v is number => v !== null && Number.isFinite(v))));
  const gw = (W - L - R) / Math.max(1, categories.length);
  const bw = (gw * 0.8) / Math.max(1, series.length);
  const parts: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">`, `<text x="${L}" y="18" font-size="14" font-weight="bold">${esc(title)}</text>`];
  for (let k = 0; k <= 4; k++) {
    const yy = T + (H - T - B) * (1 - k / 4);
    parts.push(`<line x1="${L}" y1="${yy}" x2="${W - R}" y2="${yy}" stroke="#ddd"/><text x="${L - 6}" y="${yy + 4}" font-size="10" text-anchor="end">${fmt((hi * k) / 4)}</text>`);
  }
  categories.forEach((c, ci) => parts.push(`<text x="${L + gw * ci + gw / 2}" y="${H - B + 14}" font-size="11" text-anchor="middle">${esc(c)}</text>`));
  series.forEach((s, si) => {
    const col = COLORS[si % COLORS.length]!;
    s.values.forEach((v, ci) => {
      if (v === null || !Number.isFinite(v)) return;
      const h = ((H - T - B) * v) / hi;
      parts.push(`<rect x="${(L + gw * ci + gw * 0.1 + bw * si).toFixed(1)}" y="${(H - B - h).toFixed(1)}" width="${bw.toFixed(1)}" height="${h.toFixed(1)}" fill="${col}"><title>${esc(`${s.name} ${categories[ci]}: ${fmt(v)}`)}</title></rect>`);
    });
    parts.push(`<rect x="${W - R + 10}" y="${T + si * 16}" width="10" height="10" fill="${col}"/><text x="${W - R + 24}" y="${T + si * 16 + 9}" font-size="11">${esc(s.name)}</text>`);
  });
  parts.push(`<text x="${L}" y="${H - 4}" font-size="10">y: ${esc(opts.yLabel)}</text></svg>`);
  return parts.join("");
}
