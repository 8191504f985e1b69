/**
 * The plan report as one self-contained HTML page with inline-SVG charts (no scripts, no external assets): history
 * vs forecast with its interval per (model, region), last hour's forecast error, targets vs current instances per
 * region, spot donated, cost, solver status, time and gap, unmet demand and warnings.
 */
import type { PlanReport, SeriesForecast } from "./report.js";

/** Escapes text for HTML content and attribute values. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

const W = 420;
const H = 160;
const PAD = 30;

function pts(values: readonly number[], x0: number, dx: number, yOf: (v: number) => number): string {
  return values.map((v, i) => `${(x0 + i * dx).toFixed(1)},${yOf(v).toFixed(1)}`).join(" ");
}

/** History (line) vs forecast (line) with its 10–90% interval (band). */
export function forecastChart(f: SeriesForecast): string {
  // The last day of history, so the next hour is visible beside it.
  const hist = f.historyWindows.slice(-144);
  const n = hist.length + f.forecastSteps.length;
  const maxV = Math.max(1e-9, ...hist, ...f.forecastSteps.map((s) => s.upper));
  const dx = (W - 2 * PAD) / Math.max(1, n - 1);
  const yOf = (v: number) => H - PAD + 10 - ((H - PAD - 10) * v) / maxV;
  const x0f = PAD + hist.length * dx;
  const upper = f.forecastSteps.map((s) => s.upper);
  const lower = f.forecastSteps.map((s) => s.lower);
  const band = `${pts(upper, x0f, dx, yOf)} ${pts([...lower].reverse(), x0f + (lower.length - 1) * dx, -dx, yOf)}`;
  return `<svg class="chart forecast" role="img" aria-label="history and forecast for ${esc(f.model)} in ${esc(f.region)}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">
<title>${esc(f.model)} @ ${esc(f.region)}: history vs forecast</title>
<line x1="${PAD}" y1="${H - PAD + 10}" x2="${W - PAD}" y2="${H - PAD + 10}" stroke="#999"/>
<polygon points="${band}" fill="#f4a26155" stroke="none"/>
<polyline points="${pts(hist, PAD, dx, yOf)}" fill="none" stroke="#264653" stroke-width="1.2"/>
<polyline points="${pts(f.forecastSteps.map((s) => s.mean), x0f, dx, yOf)}" fill="none" stroke="#e76f51" stroke-width="2"/>
<text x="${PAD}" y="12" font-size="11">${esc(f.model)} @ ${esc(f.region)} — peak ${f.peak.mean.toFixed(0)} [${f.peak.lower.toFixed(0)}, ${f.peak.upper.toFixed(0)}] tok/s (${esc(f.method)})</text>
<text x="2" y="${yOf(maxV) + 10}" font-size="9">${maxV.toFixed(0)}</text>
<text x="${PAD}" y="${H - 4}" font-size="9">last 24 h (10-min windows) · next hour: forecast and 10–90% band</text>
</svg>`;
}

/** Horizontal bars: one row per label, with optional second value (drawn as an outline). */
export function barChart(title: string, rows: { label: string; a: number; b?: number }[], aName: string, bName?: string): string {
  const rowH = 16;
  const h = 30 + rows.length * rowH;
  const maxV = Math.max(1e-9, ...rows.map((r) => Math.max(Math.abs(r.a), Math.abs(r.b ?? 0))));
  const x0 = 150;
  const scale = (W + 80 - x0 - 90) / maxV; // 90 px kept for the value labels
  const bars = rows
    .map((r, i) => {
      const y = 24 + i * rowH;
      const b = r.b === undefined ? "" : `<rect x="${x0}" y="${y}" width="${(Math.abs(r.b) * scale).toFixed(1)}" height="${rowH - 4}" fill="none" stroke="#264653"/>`;
      return `<text x="2" y="${y + 10}" font-size="10">${esc(r.label)}</text><rect x="${x0}" y="${y + 2}" width="${(Math.abs(r.a) * scale).toFixed(1)}" height="${rowH - 8}" fill="${r.a < 0 ? "#e76f51" : "#2a9d8f"}"/>${b}<text x="${x0 + Math.abs(r.a) * scale + 4}" y="${y + 10}" font-size="9">${r.a.toFixed(1)}${r.b === undefined ? "" : ` / ${r.b.toFixed(1)}`}</text>`;
    })
    .join("\n");
  return `<svg class="chart bars" role="img" aria-label="${esc(title)}" width="${W + 80}" height="${h}" viewBox="0 0 ${W + 80} ${h}" xmlns="http://www.w3.org/2000/svg">
<title>${esc(title)}</title><text x="2" y="12" font-size="11">${esc(title)} — filled: ${esc(aName)}${bName ? `, outline: ${esc(bName)}` : ""}</text>
${bars}
</svg>`;
}

const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : "—");

/** The full page for one report. `maxSeriesCharts` bounds the page size for large fleets (largest demand first). */
export function renderPlanHtml(r: PlanReport, maxSeriesCharts = 24): string {
  const series = [...r.forecasts].sort((a, b) => b.demandTokensPerS - a.demandTokensPerS).slice(0, maxSeriesCharts);
  const byRegion = new Map<string, { current: number; target: number }>();
  for (const a of r.actions) {
    const cur = byRegion.get(a.region) ?? { current: 0, target: 0 };
    cur.current += a.current;
    cur.target += a.target;
    byRegion.set(a.region, cur);
  }
  const errors = r.forecasts.filter((f) => f.lastHour !== null).slice(0, 40);
  const changed = r.actions.filter((a) => a.target !== a.current).slice(0, 200);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>tidegate plan ${esc(r.id)}</title>
<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1100px}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:8px}.warn{color:#9b2226}</style>
</head><body>
<h1>Plan ${esc(r.id)}</h1>
<p>decision ${r.decisionId} · made ${esc(new Date(r.madeAtMs).toISOString())} · for ${(r.intervalMs / 60000).toFixed(0)} min · ${r.advisory ? "<strong>advisory</strong> (published, not acted on)" : "acted on"}${r.strategy ? ` · paced by ${esc(r.strategy)}` : ""} · α ${r.alpha} · β ${r.beta}</p>
<h2>Solver</h2>
<table><tr><th>path</th><th>status</th><th>objective</th><th>bound</th><th>gap</th><th>solve ms</th><th>endpoints</th></tr>
<tr><td>${esc(r.solver.path)}</td><td>${esc(r.solver.status)}</td><td>${fmt(r.solver.objective)}</td><td>${fmt(r.solver.bound)}</td><td>${fmt(100 * r.solver.gap, 3)}%</td><td>${fmt(r.solver.solveMs, 1)}</td><td>${r.solver.endpoints}</td></tr></table>
<h2>Cost</h2><p>holding ${fmt(r.cost.holdPerInterval)} + starts ${fmt(r.cost.starts)} = <strong>${fmt(r.cost.total)}</strong> per interval</p>
${r.unmet.length > 0 ? `<h2 class="warn">Could not be met</h2><ul>${r.unmet.map((u) => `<li class="warn">${esc(u.kind)} ${esc([u.model, u.region, u.gpu].filter(Boolean).join(" @ "))}: ${fmt(u.amount, 1)} — ${esc(u.why)}</li>`).join("")}</ul>` : ""}
${r.warnings.length > 0 ? `<h2>Warnings</h2><ul>${r.warnings.slice(0, 100).map((w) => `<li>${esc(w)}</li>`).join("")}</ul>` : ""}
<h2>History vs forecast</h2><div class="charts">${series.map((f) => forecastChart(f)).join("\n")}</div>
<h2>Last hour's forecast error</h2>${errors.length > 0 ? barChart("forecast error of last hour's peak, %", errors.map((f) => ({ label: `${f.model}@${f.region}`, a: f.lastHour!.errorPct })), "error %") : "<p>No previous plan to compare with.</p>"}
<h2>Targets vs current instances</h2>${barChart("instances per region", [...byRegion].map(([region, v]) => ({ label: region, a: v.target, b: v.current })), "target", "current")}
<h2>Spot</h2>${barChart("GPUs donated to spot", r.spot.map((s) => ({ label: `${s.region}/${s.gpu}`, a: s.donatedGpus, b: s.capacityGpus })), "donated", "capacity")}
<h2>Changes</h2><table><tr><th>model</th><th>region</th><th>gpu</th><th>current</th><th>target</th><th>reclaim same</th><th>reclaim other</th><th>new</th><th>donate</th></tr>
${changed.map((a) => `<tr><td>${esc(a.model)}</td><td>${esc(a.region)}</td><td>${esc(a.gpu)}</td><td>${a.current}</td><td>${a.target}</td><td>${a.reclaimSameModel}</td><td>${a.reclaimOtherModel}</td><td>${a.newInstances}</td><td>${a.donate}</td></tr>`).join("\n")}</table>
<h2>Forecasts</h2><table><tr><th>model@region</th><th>method</th><th>peak</th><th>90% upper</th><th>NIW buffer</th><th>F</th><th>fallback</th></tr>
${r.forecasts.slice(0, 200).map((f) => `<tr><td>${esc(f.model)}@${esc(f.region)}</td><td>${esc(f.method)}</td><td>${fmt(f.peak.mean, 1)}</td><td>${fmt(f.peak.upper, 1)}</td><td>${fmt(f.bufferTokensPerS, 1)}</td><td>${fmt(f.demandTokensPerS, 1)}</td><td>${esc(f.fallbackReason ?? "")}</td></tr>`).join("\n")}</table>
</body></html>
`;
}
