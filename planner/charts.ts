/**
 * Inline-SVG charts for the plan pages (no scripts, no external assets). Every chart has a labelled time axis
 * (UTC clock times, or hours from the trace start when the data has no calendar) and a labelled value axis with
 * its unit. `forecastChart` draws one (model, region): the last day of history and, zoomed beside it, the last
 * hours and the planned hour with its forecast, 10–90% band and — once the hour has passed — the actual load.
 * `lineChart` draws named series over time (the index's timeline). A value axis in "%" is labelled in percent
 * (ticks "0%" … "100%"; 0–100 when there is nothing above 0), and a chart with nothing to draw says so in its plot
 * area ("no data yet: …" and why). Pure string builders.
 */
import type { Band } from "../forecasts/forecaster.js";

/** Escapes text for HTML content and attribute values. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** How times are shown: UTC clock ("calendar") or hours since the trace start ("relative"). */
export type TimeBase = "calendar" | "relative";

const HOUR_MS = 3_600_000;
const pad2 = (n: number) => String(n).padStart(2, "0");

/** A time as the pages show it: "2026-11-23 14:00 UTC", or "hour 336" (+ ":30" within the hour) when relative. */
export function fmtTime(ms: number, base: TimeBase = "calendar", withDate = true): string {
  if (base === "relative") {
    const h = Math.floor(ms / HOUR_MS);
    const m = Math.round((ms - h * HOUR_MS) / 60_000);
    return `hour ${h}${m === 0 ? "" : `:${pad2(m)}`}`;
  }
  const d = new Date(ms);
  const hm = `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
  return withDate ? `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())} ${hm} UTC` : hm;
}

/** A short tick label: "14:00" (the date added at midnight) or "h336". */
function tickLabel(ms: number, base: TimeBase): string {
  if (base === "relative") {
    const h = ms / HOUR_MS;
    return Number.isInteger(h) ? `h${h}` : `h${Math.floor(h)}:${pad2(Math.round((h - Math.floor(h)) * 60))}`;
  }
  const d = new Date(ms);
  if (d.getUTCHours() === 0 && d.getUTCMinutes() === 0) return `${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
  return `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}`;
}

/** A round step (1, 2 or 5 × 10^k) that splits `range` into about `n` parts. */
export function niceStep(range: number, n = 4): number {
  if (!(range > 0)) return 1;
  const raw = range / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/** Short number: 1234 → "1.2k", 2500000 → "2.5M", 12.5 → "12.5". */
export function fmtNum(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(0)}k`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 10 || a === 0) return `${+v.toFixed(0)}`;
  return `${+v.toFixed(2)}`;
}

const TIME_STEPS = [600_000, 1_800_000, HOUR_MS, 2 * HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 12 * HOUR_MS, 24 * HOUR_MS, 48 * HOUR_MS, 168 * HOUR_MS];

/** A rectangle on the SVG and the data range it maps. */
interface Frame {
  x: number;
  y: number;
  w: number;
  h: number;
  fromMs: number;
  toMs: number;
  yMax: number;
}

const xOf = (f: Frame, ms: number) => f.x + ((ms - f.fromMs) / Math.max(1, f.toMs - f.fromMs)) * f.w;
const yOf = (f: Frame, v: number) => f.y + f.h - (Math.max(0, v) / f.yMax) * f.h;

/** Axes with ticks and labels; the y title names the unit, the x title the time base. */
function axes(f: Frame, base: TimeBase, unit: string, showYTitle: boolean, maxXTicks: number, yTick?: { step: number; label: (v: number) => string }): string {
  const step = TIME_STEPS.find((s) => (f.toMs - f.fromMs) / s <= maxXTicks) ?? TIME_STEPS.at(-1)!;
  const xt: string[] = [];
  for (let t = Math.ceil(f.fromMs / step) * step; t <= f.toMs + 1; t += step) {
    const x = xOf(f, t);
    xt.push(`<line x1="${x.toFixed(1)}" y1="${f.y + f.h}" x2="${x.toFixed(1)}" y2="${f.y + f.h + 4}" stroke="#777"/><line x1="${x.toFixed(1)}" y1="${f.y}" x2="${x.toFixed(1)}" y2="${f.y + f.h}" stroke="#eee"/><text class="tick" x="${x.toFixed(1)}" y="${f.y + f.h + 14}" font-size="9" text-anchor="middle">${esc(tickLabel(t, base))}</text>`);
  }
  const ys = yTick?.step ?? niceStep(f.yMax, 4);
  const yLabel = yTick?.label ?? ((v: number) => `${fmtNum(v)}${unit === "%" ? "%" : ""}`);
  const yt: string[] = [];
  for (let v = 0; v <= f.yMax + 1e-9; v += ys) {
    const y = yOf(f, v);
    yt.push(`<line x1="${f.x - 4}" y1="${y.toFixed(1)}" x2="${f.x}" y2="${y.toFixed(1)}" stroke="#777"/><line x1="${f.x}" y1="${y.toFixed(1)}" x2="${f.x + f.w}" y2="${y.toFixed(1)}" stroke="#eee"/><text class="tick" x="${f.x - 6}" y="${(y + 3).toFixed(1)}" font-size="9" text-anchor="end">${esc(yLabel(v))}</text>`);
  }
  const xTitle = base === "relative" ? "hours since trace start" : "time (UTC)";
  return `<g class="axis y" data-unit="${esc(unit)}">${yt.join("")}<line x1="${f.x}" y1="${f.y}" x2="${f.x}" y2="${f.y + f.h}" stroke="#777"/>${showYTitle ? `<text class="axis-title" x="${f.x - 34}" y="${f.y + f.h / 2}" font-size="10" text-anchor="middle" transform="rotate(-90 ${f.x - 34} ${f.y + f.h / 2})">${esc(unit)}</text>` : ""}</g>
<g class="axis x">${xt.join("")}<line x1="${f.x}" y1="${f.y + f.h}" x2="${f.x + f.w}" y2="${f.y + f.h}" stroke="#777"/><text class="axis-title" x="${f.x + f.w / 2}" y="${f.y + f.h + 27}" font-size="10" text-anchor="middle">${xTitle}</text></g>`;
}

/** A polyline over (time, value) points; NaN values break the line. */
function path(f: Frame, pts: readonly [number, number][], cls: string, stroke: string, width: number, dash = ""): string {
  const segs: string[][] = [[]];
  for (const [t, v] of pts) {
    if (t < f.fromMs - 1 || t > f.toMs + 1) continue;
    if (!Number.isFinite(v)) {
      if (segs.at(-1)!.length > 0) segs.push([]);
      continue;
    }
    segs.at(-1)!.push(`${xOf(f, t).toFixed(1)},${yOf(f, v).toFixed(1)}`);
  }
  return segs
    .filter((s) => s.length > 0)
    .map((s) => (s.length === 1 ? `<circle class="${cls}" cx="${s[0]!.split(",")[0]}" cy="${s[0]!.split(",")[1]}" r="2" fill="${stroke}"/>` : `<polyline class="${cls}" points="${s.join(" ")}" fill="none" stroke="${stroke}" stroke-width="${width}"${dash ? ` stroke-dasharray="${dash}"` : ""}/>`))
    .join("");
}

/** The 10–90% band as a polygon over the forecast steps (each step drawn as the window it covers). */
function band(f: Frame, startMs: number, stepMs: number, steps: readonly Band[]): string {
  const up: string[] = [];
  const lo: string[] = [];
  steps.forEach((s, i) => {
    for (const t of [startMs + i * stepMs, startMs + (i + 1) * stepMs]) {
      up.push(`${xOf(f, t).toFixed(1)},${yOf(f, s.upper).toFixed(1)}`);
      lo.push(`${xOf(f, t).toFixed(1)},${yOf(f, s.lower).toFixed(1)}`);
    }
  });
  return `<polygon class="band" points="${[...up, ...lo.reverse()].join(" ")}" fill="#f4a26199" stroke="#f4a261" stroke-width="0.8"/>`;
}

/** Steps as a staircase: each value held over its window. */
const stairs = (startMs: number, stepMs: number, values: readonly number[]): [number, number][] => values.flatMap((v, i) => [[startMs + i * stepMs, v], [startMs + (i + 1) * stepMs, v]] as [number, number][]);

/** One (model, region) for `forecastChart`. */
export interface ForecastChartInput {
  title: string;
  /** Unit of the values, e.g. "tokens/s". */
  unit: string;
  timeBase: TimeBase;
  stepMs: number;
  /** History windows, oldest first, the last ending at `forecastStartMs`. */
  history: readonly number[];
  forecastStartMs: number;
  forecast: readonly Band[];
  /** Actual windows of the planned hour (NaN = not yet known), aligned with `forecast`. */
  actual?: readonly number[];
  /** Shown in the legend when no actual load is drawn: why (e.g. "actual: not yet, the hour has not started"). */
  actualNote?: string;
}

const W = 620;
const H = 236;

/** History vs forecast: the last 24 h (left) and the last 3 h with the planned hour (right), same value axis. */
export function forecastChart(c: ForecastChartInput): string {
  const fEnd = c.forecastStartMs + c.forecast.length * c.stepMs;
  const histStart = c.forecastStartMs - c.history.length * c.stepMs;
  const dayFrom = Math.max(histStart, c.forecastStartMs - 24 * HOUR_MS);
  const zoomFrom = Math.max(histStart, c.forecastStartMs - 3 * HOUR_MS);
  const shown = c.history.slice(Math.round((dayFrom - histStart) / c.stepMs));
  const actual = (c.actual ?? []).filter((v) => Number.isFinite(v));
  const yMaxRaw = Math.max(0, ...shown.filter(Number.isFinite), ...c.forecast.map((s) => s.upper), ...actual);
  const yMax = yMaxRaw > 0 ? Math.ceil(yMaxRaw / niceStep(yMaxRaw, 4)) * niceStep(yMaxRaw, 4) : 1;
  const top = 46;
  const ph = H - top - 38;
  const left: Frame = { x: 50, y: top, w: 300, h: ph, fromMs: dayFrom, toMs: fEnd, yMax };
  const right: Frame = { x: 395, y: top, w: 210, h: ph, fromMs: zoomFrom, toMs: fEnd, yMax };
  const hist = c.history.map((v, i) => [histStart + (i + 0.5) * c.stepMs, v] as [number, number]);
  const mean = stairs(c.forecastStartMs, c.stepMs, c.forecast.map((s) => s.mean));
  const act = c.actual === undefined ? [] : stairs(c.forecastStartMs, c.stepMs, c.actual);
  const hasActual = actual.length > 0;
  const draw = (f: Frame, yTitle: boolean, ticks: number) => `${axes(f, c.timeBase, c.unit, yTitle, ticks)}
<rect x="${xOf(f, c.forecastStartMs).toFixed(1)}" y="${f.y}" width="${(xOf(f, fEnd) - xOf(f, c.forecastStartMs)).toFixed(1)}" height="${f.h}" fill="#f7f3e8"/>
${band(f, c.forecastStartMs, c.stepMs, c.forecast)}
${path(f, hist, "history", "#264653", 1.3)}
${path(f, mean, "forecast", "#e76f51", 2)}
${hasActual ? path(f, act, "actual", "#3a86ff", 2.2, "5 2") : ""}
<line x1="${xOf(f, c.forecastStartMs).toFixed(1)}" y1="${f.y}" x2="${xOf(f, c.forecastStartMs).toFixed(1)}" y2="${f.y + f.h}" stroke="#999" stroke-dasharray="3 3"/>`;
  const legend = [
    ["#264653", "history", ""],
    ["#e76f51", "forecast", ""],
    ["#f4a26199", "10–90% band", "band"],
    ...(hasActual ? [["#3a86ff", "actual (planned hour)", "dash"]] : c.actualNote !== undefined ? [["none", c.actualNote, "note"]] : []),
  ]
    .map(([color, label, kind], i) => {
      const x = 50 + i * 130;
      if (kind === "note") return `<text class="actual-note" x="${x}" y="27" font-size="9" fill="#666">${esc(label!)}</text>`;
      const mark = kind === "band" ? `<rect x="${x}" y="19" width="16" height="8" fill="${color}" stroke="#f4a261" stroke-width="0.5"/>` : `<line x1="${x}" y1="23" x2="${x + 16}" y2="23" stroke="${color}" stroke-width="2"${kind === "dash" ? ' stroke-dasharray="4 2"' : ""}/>`;
      return `${mark}<text x="${x + 20}" y="27" font-size="9">${esc(label!)}</text>`;
    })
    .join("");
  return `<svg class="chart forecast" role="img" aria-label="${esc(c.title)}: history and forecast, ${esc(c.unit)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<title>${esc(c.title)}: history vs forecast (${esc(c.unit)})</title>
<text x="4" y="12" font-size="11" font-weight="600">${esc(c.title)}</text>${legend}
<text x="${left.x + left.w / 2}" y="${top - 2}" font-size="9" fill="#555" text-anchor="middle">last 24 h</text>
<text x="${right.x + right.w / 2}" y="${top - 2}" font-size="9" fill="#555" text-anchor="middle">zoom: last 3 h + planned hour (shaded)</text>
${draw(left, true, 6)}
${draw(right, false, 4)}
</svg>`;
}

/** One named series for `lineChart`: (time, value) points, oldest first. */
export interface LineSeries {
  name: string;
  points: readonly [number, number][];
}

const PALETTE = ["#264653", "#e76f51", "#2a9d8f", "#e9c46a", "#8338ec", "#3a86ff", "#6a994e", "#bc4749"];

/**
 * `series` with identical ones (the same points) drawn once, named together ("us-east = us-central = us-west"): three
 * equal lines would otherwise lie on top of each other in the last one's colour.
 */
export function mergeIdenticalSeries(series: readonly LineSeries[]): LineSeries[] {
  const same = (a: LineSeries, b: LineSeries) => a.points.length === b.points.length && a.points.every((p, i) => p[0] === b.points[i]![0] && Object.is(p[1], b.points[i]![1]));
  const out: LineSeries[] = [];
  for (const s of series) {
    const at = out.findIndex((x) => same(x, s));
    if (at < 0) out.push({ name: s.name, points: s.points });
    else out[at] = { name: `${out[at]!.name} = ${s.name}`, points: out[at]!.points };
  }
  return out;
}

/**
 * Named series over time with a legend (the index's timeline); a single point is drawn as a dot; identical series are
 * drawn once under their names together (mergeIdenticalSeries). With no finite value in any series the plot area
 * says "no data yet: `emptyWhy`".
 */
export function lineChart(o: { title: string; unit: string; timeBase: TimeBase; series: readonly LineSeries[]; cls?: string; stepped?: boolean; holdLastMs?: number; emptyWhy?: string; log?: boolean }): string {
  if (o.log === true) {
    // A log10 axis: values drawn as log10(max(v, 1)), ticks at the powers of 10 labelled in the unit's own numbers.
    const logged = o.series.map((s) => ({ name: s.name, points: s.points.map(([t, v]) => [t, Number.isFinite(v) ? Math.log10(Math.max(v, 1)) : v] as [number, number]) }));
    return lineChartOn({ ...o, series: logged, title: o.title, unit: `${o.unit}, log scale` }, { step: 1, label: (v) => fmtNum(10 ** v) });
  }
  return lineChartOn(o);
}

function lineChartOn(o: { title: string; unit: string; timeBase: TimeBase; series: readonly LineSeries[]; cls?: string; stepped?: boolean; holdLastMs?: number; emptyWhy?: string }, yTick?: { step: number; label: (v: number) => string }): string {
  const named = mergeIdenticalSeries(o.series);
  // A stepped series holds each value until the next point, and the last one for `holdLastMs` (its interval).
  const series = o.stepped === true && (o.holdLastMs ?? 0) > 0 ? named.map((s) => ({ ...s, points: s.points.length > 0 ? [...s.points, [s.points.at(-1)![0] + o.holdLastMs!, s.points.at(-1)![1]] as [number, number]] : s.points })) : named;
  const all = series.flatMap((s) => s.points);
  const ts = all.map((p) => p[0]);
  let from = Math.min(...ts);
  let to = Math.max(...ts);
  if (!(to > from)) {
    from = (Number.isFinite(from) ? from : 0) - HOUR_MS;
    to = from + 2 * HOUR_MS;
  }
  const rawMax = Math.max(0, ...all.map((p) => p[1]).filter(Number.isFinite));
  // All zero (or nothing): a 0–1 axis, or 0–100 for a percentage.
  const yStep = yTick?.step ?? niceStep(rawMax, 4);
  const yMax = rawMax > 0 ? Math.ceil(rawMax / yStep) * yStep : o.unit === "%" ? 100 : 1;
  const empty = !all.some((p) => Number.isFinite(p[1]));
  const f: Frame = { x: 56, y: 34, w: W - 80, h: 140, fromMs: from, toMs: to, yMax };
  const lines = series
    .map((s, i) => {
      const pts = o.stepped === true ? s.points.flatMap((p, k) => (k === 0 ? [p] : [[p[0], s.points[k - 1]![1]] as [number, number], p])) : s.points;
      return path(f, pts, "series", PALETTE[i % PALETTE.length]!, 1.8) + named[i]!.points.map((p) => (Number.isFinite(p[1]) ? `<circle cx="${xOf(f, p[0]).toFixed(1)}" cy="${yOf(f, p[1]).toFixed(1)}" r="1.8" fill="${PALETTE[i % PALETTE.length]}"/>` : "")).join("");
    })
    .join("\n");
  // Each entry as wide as its name (about 5 px a character at font-size 9), at least 110 px.
  let x = 56;
  const legend = named
    .map((s, i) => {
      const at = x;
      x += Math.max(110, 26 + 5 * s.name.length);
      return `<line x1="${at}" y1="24" x2="${at + 16}" y2="24" stroke="${PALETTE[i % PALETTE.length]}" stroke-width="2"/><text x="${at + 20}" y="28" font-size="9">${esc(s.name)}</text>`;
    })
    .join("");
  return `<svg class="chart ${o.cls ?? "timeline"}" role="img" aria-label="${esc(o.title)} (${esc(o.unit)})" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<title>${esc(o.title)} (${esc(o.unit)})</title><text x="4" y="12" font-size="11" font-weight="600">${esc(o.title)}</text>${legend}
${axes(f, o.timeBase, o.unit, true, 8, yTick)}
${lines}${empty ? `\n<text class="empty" x="${f.x + f.w / 2}" y="${f.y + f.h / 2}" font-size="11" fill="#666" text-anchor="middle">${esc(o.emptyWhy === undefined ? "no data yet" : `no data yet: ${o.emptyWhy}`)}</text>` : ""}
</svg>`;
}

/** One named group of `barChart` values, one per category (NaN: no bar). */
export interface BarSeries {
  name: string;
  values: readonly number[];
}

/** Grouped bars (the replay comparison page): one group per category, one bar per series, a legend and a value axis in `unit`. */
export function barChart(o: { title: string; unit: string; categories: readonly string[]; series: readonly BarSeries[] }): string {
  const finite = o.series.flatMap((s) => s.values.filter(Number.isFinite));
  const rawMax = Math.max(0, ...finite);
  const yMax = rawMax > 0 ? Math.ceil(rawMax / niceStep(rawMax, 4)) * niceStep(rawMax, 4) : 1;
  const f = { x: 56, y: 34, w: W - 80, h: 140, yMax };
  const yOfBar = (v: number) => f.y + f.h - (Math.max(0, v) / f.yMax) * f.h;
  const ys = niceStep(f.yMax, 4);
  const ticks: string[] = [];
  for (let v = 0; v <= f.yMax + 1e-9; v += ys) {
    const y = yOfBar(v);
    ticks.push(`<line x1="${f.x - 4}" y1="${y.toFixed(1)}" x2="${f.x + f.w}" y2="${y.toFixed(1)}" stroke="#eee"/><text class="tick" x="${f.x - 6}" y="${(y + 3).toFixed(1)}" font-size="9" text-anchor="end">${fmtNum(v)}</text>`);
  }
  const gw = f.w / Math.max(1, o.categories.length);
  const bw = (gw * 0.8) / Math.max(1, o.series.length);
  const bars = o.series.flatMap((s, si) =>
    s.values.map((v, ci) => {
      if (!Number.isFinite(v)) return "";
      const y = yOfBar(v);
      return `<rect class="bar" x="${(f.x + gw * ci + gw * 0.1 + bw * si).toFixed(1)}" y="${y.toFixed(1)}" width="${bw.toFixed(1)}" height="${(f.y + f.h - y).toFixed(1)}" fill="${PALETTE[si % PALETTE.length]}"><title>${esc(`${s.name} ${o.categories[ci]}: ${fmtNum(v)} ${o.unit}`)}</title></rect>`;
    }),
  );
  const labels = o.categories.map((c, ci) => `<text class="tick" x="${(f.x + gw * ci + gw / 2).toFixed(1)}" y="${f.y + f.h + 14}" font-size="9" text-anchor="middle">${esc(c)}</text>`);
  let x = 56;
  const legend = o.series
    .map((s, i) => {
      const at = x;
      x += Math.max(110, 26 + 5 * s.name.length);
      return `<rect x="${at}" y="19" width="10" height="10" fill="${PALETTE[i % PALETTE.length]}"/><text x="${at + 14}" y="28" font-size="9">${esc(s.name)}</text>`;
    })
    .join("");
  return `<svg class="chart bars" role="img" aria-label="${esc(o.title)} (${esc(o.unit)})" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<title>${esc(o.title)} (${esc(o.unit)})</title><text x="4" y="12" font-size="11" font-weight="600">${esc(o.title)}</text>${legend}
<g class="axis y" data-unit="${esc(o.unit)}">${ticks.join("")}<line x1="${f.x}" y1="${f.y}" x2="${f.x}" y2="${f.y + f.h}" stroke="#777"/><text class="axis-title" x="${f.x - 34}" y="${f.y + f.h / 2}" font-size="10" text-anchor="middle" transform="rotate(-90 ${f.x - 34} ${f.y + f.h / 2})">${esc(o.unit)}</text></g>
<g class="axis x"><line x1="${f.x}" y1="${f.y + f.h}" x2="${f.x + f.w}" y2="${f.y + f.h}" stroke="#777"/>${labels.join("")}</g>
${bars.join("")}
</svg>`;
}
