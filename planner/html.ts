/**
 * The plan page: one self-contained HTML document (inline SVG, inline CSS, no scripts) for one report — what was
 * planned and what it costs, the forecast per (model, region) against history (and the actual load once the hour
 * has passed), every endpoint's change, warnings grouped, and the solver's figures. Served at /plans/{id}
 * (routes.ts adds the review and navigation forms) and written by `tidegate plan --out`. Every term of art (α, β,
 * NIW buffer, the strategy and forecast method names, F, …) links to the glossary at the end of the page and carries
 * its meaning as a tooltip (glossary.ts). Last hour's forecast error is shown only once that hour has ended: "not
 * yet" and why before (last-hour.ts). Each model's SLO, its capacity per instance at it with the correction factor,
 * and its attainment since the previous plan follow the changes (slo-page.ts).
 */
import { poolLabel } from "./pools.js";
import type { PlanReport, SeriesForecast } from "./report.js";
import { esc, fmtNum, fmtTime, forecastChart, type TimeBase } from "./charts.js";
import { glossarySection, methodKey, strategyKey, term } from "./glossary.js";
import { sloSection } from "./slo-page.js";

export { esc };

/** What the server adds around a report (absent for files written by `tidegate plan`). */
export interface PlanPageContext {
  /** Actual IW tokens/s windows of the planned hour per `model\tregion` (NaN where not recorded yet). */
  actuals?: ReadonlyMap<string, readonly number[]>;
  /** Earlier and later plans, for the navigation links. */
  prevId?: string;
  nextId?: string;
  /** The signed-in viewer: role and the session's CSRF token (for the forms); absent = no forms. */
  viewer?: { role: "admin" | "planner"; csrf?: string; who: string };
  /** Whether approve/reject can be offered (this process runs the planner loop and this plan is the newest). */
  canReview?: boolean;
  /** A message to show at the top (e.g. "approved and sent to 3 regions"). */
  notice?: string;
}

/** Page chrome shared by the plan pages: head, styles, header bar. */
export function pageShell(title: string, body: string, viewer?: PlanPageContext["viewer"]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header{background:#264653;color:#fff;padding:.5em 1.5em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff}header .who{margin-left:auto;font-size:13px}header form{display:inline}
main{padding:1em 1.5em;max-width:1280px}
h1{font-size:1.4em;margin:.3em 0}h2{font-size:1.1em;margin:1.2em 0 .4em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12.5px;background:#fff}td,th{border:1px solid #d5d5d5;padding:3px 7px;text-align:right}
th{background:#eef1f3;position:sticky;top:0}td.l,th.l{text-align:left}
tr.unchanged td{color:#666}tr.up td.d{color:#1b7f3b;font-weight:600}tr.down td.d{color:#b42318;font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:10px}.charts svg{background:#fff;border:1px solid #e3e3e3}
.warn{color:#9b2226}.muted{color:#666;font-size:12.5px}.notice{background:#e9f5ee;border:1px solid #9bd3ae;padding:.5em 1em}
.cost{font-size:1.1em}.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#eee}
.pill.pending{background:#fff3cd}.pill.approved{background:#d1f0dc}.pill.rejected{background:#f8d7da}
button{font-size:13px;padding:4px 12px;cursor:pointer}button.approve{background:#2a9d8f;color:#fff;border:0}button.reject{background:#b42318;color:#fff;border:0}
.nav a{margin-right:1em}.filters a{margin-right:.6em}.filters a.on{font-weight:700;text-decoration:none;color:#000}
a.term{color:inherit;text-decoration:underline dotted;cursor:help}td.pending{color:#7a5b00;text-align:center}
td.met{color:#1b7f3b}td.missed{color:#b42318;font-weight:600}td.none{color:#666;text-align:center}td.derivation{font-size:11.5px;max-width:560px}
table.slo td:first-child,table.capacity td:nth-child(-n+2){white-space:nowrap}
.glossary dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;font-size:13px;max-width:1100px}.glossary dt{font-weight:600}.glossary dd{margin:0}
</style>
</head><body>
<header><strong>tidegate planner</strong>${viewer ? `<a href="/plans">plans</a><span class="who">signed in as ${esc(viewer.who)}${viewer.csrf ? ` <form method="post" action="/logout"><input type="hidden" name="csrf" value="${esc(viewer.csrf)}"><button type="submit">sign out</button></form>` : ""}</span>` : ""}</header>
<main>
${body}
</main></body></html>
`;
}

const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : "—");

/** The forecast table's components cell: each part's weight and recent error, one per line ("—" without parts). */
function componentsCell(f: SeriesForecast): string {
  if (f.components === undefined || f.components.length === 0) return `<td class="l components">—</td>`;
  const line = (c: NonNullable<SeriesForecast["components"]>[number]) =>
    `<span class="component" data-component="${esc(c.name)}" title="${esc(`${c.name}: weight ${c.weight.toFixed(3)}; its own MAPE over ${c.origins} recent forecasts`)}">${esc(c.name)} <span class="weight">${fmt(c.weight, 2)}</span> · <span class="recent-error">${c.recentMapePct === null ? "—" : `${fmt(c.recentMapePct, 1)}%`}</span></span>`;
  return `<td class="l components">${f.components.map(line).join("<br>")}</td>`;
}

/** Review state of a report as a pill: acted on, awaiting review, approved or rejected (`used`: glossary terms). */
export function reviewPill(r: PlanReport, base: TimeBase, used?: Set<string>): string {
  if (r.trigger?.kind === "offline") return `<span class="pill">offline plan: not sent to any region</span>`;
  if (!r.advisory) return `<span class="pill">sent to regions when made</span>`;
  if (r.review === undefined) return `<span class="pill pending">${used === undefined ? "advisory" : term("advisory", used)}: awaiting review</span>`;
  return `<span class="pill ${r.review.state}">${r.review.state} by ${esc(r.review.by)} at ${esc(fmtTime(r.review.atMs, base))}</span>`;
}

/** Warnings grouped by what they say: "12 series: no interactive history …" with the series listed. */
export function groupWarnings(warnings: readonly string[]): { count: number; text: string; subjects: string[] }[] {
  const groups = new Map<string, { count: number; text: string; subjects: string[]; same: boolean }>();
  for (const w of warnings) {
    const m = /^([^\s:]+@[^\s:]+): (.*)$/s.exec(w);
    const subject = m?.[1] ?? "";
    const text = m?.[2] ?? w;
    const key = text.replace(/\d+(\.\d+)?/g, "#");
    const g = groups.get(key);
    if (g === undefined) groups.set(key, { count: 1, text, subjects: subject ? [subject] : [], same: true });
    else {
      g.count++;
      if (subject) g.subjects.push(subject);
      if (g.text !== text) g.same = false;
    }
  }
  return [...groups.values()].map((g) => ({ count: g.count, text: g.same ? g.text : `${g.text} (values differ per series)`, subjects: g.subjects }));
}

/** The window the forecast starts at (plans forecast from the 10-minute boundary at or before madeAtMs). */
export function forecastStartMs(r: PlanReport, f: SeriesForecast): number {
  return Math.floor(r.madeAtMs / f.stepMs) * f.stepMs;
}

/** The cost section: the cost line with its unit, the breakdown, and the objective in one sentence. */
function costSection(r: PlanReport, t: (key: string, shown?: string) => string): string {
  const cur = r.cost.currency ?? "USD";
  const b = r.cost.breakdown;
  const hours = r.intervalMs / 3_600_000;
  const per = Math.abs(hours - 1) < 1e-9 ? "for this hour" : `for this ${fmt(r.intervalMs / 60_000, 0)}-minute interval`;
  const unmetTps = r.unmet.filter((u) => u.kind !== "capacity").reduce((s, u) => s + u.amount, 0);
  if (b === undefined) {
    return `<p class="cost">Cost ${per}: <strong>${fmt(r.cost.total)} ${esc(cur)}</strong> (holding ${fmt(r.cost.holdPerInterval)} ${esc(cur)} + starts ${fmt(r.cost.starts)} ${esc(cur)})</p>`;
  }
  const rows: [string, number, string][] = [
    [`${t("holding")} (GPU-hour prices × GPUs held)`, b.holding, "planned instances held for the hour"],
    [t("vm-starts"), b.vmStarts, "new VMs: start price per GPU × GPUs"],
    [t("model-starts"), b.modelStarts, "model loads on new VMs and on spot GPUs taken from another model"],
  ];
  return `<p class="cost">Cost ${per}: <strong>${fmt(b.afterSpot)} ${esc(cur)}</strong> = holding ${fmt(b.holding)} ${esc(cur)} + VM starts ${fmt(b.vmStarts)} ${esc(cur)} + model starts ${fmt(b.modelStarts)} ${esc(cur)}.</p>
<table><tr><th class="l">part</th><th>${esc(cur)}</th><th class="l">what</th></tr>
${rows.map(([k, v, what]) => `<tr><td class="l">${k}</td><td>${fmt(v)}</td><td class="l">${what}</td></tr>`).join("")}
<tr><td class="l">${t("spot")}</td><td>0.00</td><td class="l">${b.spotReclaimedInstances} instance(s) taken back from spot, so ${fmt(b.spotSaved)} ${esc(cur)} of starts are not paid; ${b.spotDonatedGpus} GPU(s) not in the plan donated to spot</td></tr>
<tr><th class="l">total</th><th>${fmt(b.afterSpot)}</th><th class="l">${per}, in ${esc(cur)}</th></tr></table>
<p class="muted objective">The solver's ${t("objective")} (${fmt(r.solver.objective)} ${esc(cur)}) is what it minimised: the same holding, every added instance priced as a new VM plus a model start (${fmt(r.cost.starts)} ${esc(cur)}, before spot reclaims make some of them cheaper), and ${fmtNum(b.unmetPenaltyPerTokenPerS)} ${esc(cur)} per token/s of demand left unmet (${fmt(unmetTps, 1)} tokens/s here) — so it equals the cost above plus ${fmt(b.spotSaved)} ${esc(cur)} of spot savings${unmetTps > 0 ? " plus the unmet penalty" : ""}.</p>`;
}

/** The forecast table's cells for last hour (forecast, actual, error) and its note: figures, "not yet" and why, or "—". */
function lastHourCells(f: SeriesForecast, base: TimeBase): { cells: string; note: string } {
  const h = f.lastHour;
  if (h !== null) {
    const partial = h.recordedWindows !== undefined && h.windows !== undefined && h.recordedWindows < h.windows ? `actual peak from ${h.recordedWindows} of ${h.windows} ten-minute windows (the rest not recorded)` : "";
    const of = h.planId !== undefined && h.hourStartMs !== undefined && h.hourEndMs !== undefined ? `${h.planId}'s hour, ${fmtTime(h.hourStartMs, base)} – ${fmtTime(h.hourEndMs, base, false)}` : "the previous plan's hour";
    return { cells: `<td title="${esc(of)}">${fmt(h.forecastPeak, 1)}</td><td>${fmt(h.actualPeak, 1)}</td><td>${h.errorPct >= 0 ? "+" : ""}${fmt(h.errorPct, 1)}%</td>`, note: partial };
  }
  const n = f.lastHourNote;
  // Why is in the tooltip and, for the whole plan, in the sentence above the table.
  if (n?.state === "not-yet") return { cells: `<td class="pending" colspan="3" title="${esc(n.why)}">not yet</td>`, note: "" };
  return { cells: ["—", "—", "—"].map((x) => `<td${n === undefined ? "" : ` title="${esc(n.why)}"`}>${x}</td>`).join(""), note: "" };
}

/** One sentence on last hour's forecast error over every series: the mean |error|, or "not yet" and why, or why none. */
function lastHourSummary(r: PlanReport, base: TimeBase, t: (key: string, shown?: string) => string): string {
  const done = r.forecasts.filter((f) => f.lastHour !== null);
  const label = t("last-hour", "Last hour's forecast error");
  if (done.length > 0) {
    const mean = done.reduce((s, f) => s + Math.abs(f.lastHour!.errorPct), 0) / done.length;
    const h = done[0]!.lastHour!;
    const hour = h.hourStartMs !== undefined && h.hourEndMs !== undefined ? ` (${fmtTime(h.hourStartMs, base)} – ${fmtTime(h.hourEndMs, base, false)})` : "";
    return `<p class="last-hour">${label}${hour}: mean |forecast − actual| / actual of the peak ${fmt(mean, 1)}% over ${done.length} series${done.length < r.forecasts.length ? ` (${r.forecasts.length - done.length} not judged: see the table)` : ""}.</p>`;
  }
  const pending = r.forecasts.find((f) => f.lastHourNote?.state === "not-yet");
  if (pending !== undefined) return `<p class="last-hour">${label}: <strong>not yet</strong> — ${esc(pending.lastHourNote!.why)}.</p>`;
  const why = r.forecasts.find((f) => f.lastHourNote !== undefined)?.lastHourNote?.why;
  return `<p class="last-hour">${label}: none${why === undefined ? "" : ` — ${esc(why)}`}.</p>`;
}

/** The full page for one report. `maxSeriesCharts` bounds the page size for large fleets (largest demand first). */
export function renderPlanHtml(r: PlanReport, ctx: PlanPageContext = {}, maxSeriesCharts = 24): string {
  const base: TimeBase = r.timeBase ?? "calendar";
  const used = new Set<string>();
  const t = (key: string, shown?: string) => term(key, used, shown);
  const series = [...r.forecasts].sort((a, b) => b.demandTokensPerS - a.demandTokensPerS).slice(0, maxSeriesCharts);
  const byRegion = new Map<string, { current: number; target: number }>();
  for (const a of r.actions) {
    const cur = byRegion.get(a.region) ?? { current: 0, target: 0 };
    cur.current += a.current;
    cur.target += a.target;
    byRegion.set(a.region, cur);
  }
  const start = Math.floor(r.madeAtMs / 600_000) * 600_000;
  const hourText = `${fmtTime(start, base)} – ${fmtTime(start + r.intervalMs, base, false)}`;
  const v = ctx.viewer;
  const reviewForms =
    v?.role === "admin" && v.csrf !== undefined && ctx.canReview === true && r.advisory && r.review === undefined
      ? `<p class="review"><form method="post" action="/plans/${encodeURIComponent(r.id)}/approve" style="display:inline"><input type="hidden" name="csrf" value="${esc(v.csrf)}"><button class="approve" type="submit">Approve and send to the regions</button></form>
 <form method="post" action="/plans/${encodeURIComponent(r.id)}/reject" style="display:inline"><input type="hidden" name="csrf" value="${esc(v.csrf)}"><button class="reject" type="submit">Reject</button></form></p>`
      : v?.role === "planner" && r.advisory && r.review === undefined
        ? `<p class="muted">Approving needs an admin key; you are signed in with a read-only planner key.</p>`
        : "";
  const nav = v === undefined ? "" : `<p class="nav">${ctx.prevId ? `<a rel="prev" href="/plans/${encodeURIComponent(ctx.prevId)}">← earlier hour</a>` : ""}<a href="/plans">all plans</a>${ctx.nextId ? `<a rel="next" href="/plans/${encodeURIComponent(ctx.nextId)}">later hour →</a>` : ""}<a href="/plans/${encodeURIComponent(r.id)}.json">JSON</a><a href="#glossary">glossary</a></p>`;
  const changes = [...r.actions].sort((a, b) => a.model.localeCompare(b.model) || a.region.localeCompare(b.region) || a.gpu.localeCompare(b.gpu));
  const warnings = groupWarnings(r.warnings);
  const ups = r.actions.filter((a) => a.target > a.current);
  const downs = r.actions.filter((a) => a.target < a.current);
  const unmetTps = r.unmet.filter((u) => u.kind === "cover").reduce((x, u) => x + u.amount, 0);
  const moved = (xs: typeof ups, sign: string) => (xs.length === 0 ? "" : ` (${sign}${xs.reduce((x, a) => x + Math.abs(a.target - a.current), 0)} instances)`);
  const summary = `${ups.length} endpoint(s) scale out${moved(ups, "+")}, ${downs.length} scale in${moved(downs, "−")}, ${r.actions.length - ups.length - downs.length} unchanged; ${unmetTps > 0 ? `<span class="warn">${fmt(unmetTps, 1)} tokens/s of forecast demand cannot be covered (${t("unmet")})</span>` : "all forecast demand is covered"}.`;
  const actualNote = ctx.actuals === undefined ? "" : [...ctx.actuals.values()].some((a) => a.some(Number.isFinite)) ? " The dashed line is the load actually recorded in the planned hour." : " The actual load is drawn once the planned hour has data.";
  // Why a chart has no actual line (only where the server looked for one).
  const actualWhy = (f: SeriesForecast): string | undefined => {
    if (ctx.actuals === undefined) return undefined;
    const a = ctx.actuals.get(`${f.model}\t${f.region}`);
    if (a === undefined) return "actual: not yet (the hour has not started)";
    return a.some(Number.isFinite) ? undefined : "actual: nothing recorded yet";
  };
  const body = `${nav}
${ctx.notice ? `<p class="notice">${esc(ctx.notice)}</p>` : ""}
<h1>Plan for ${esc(hourText)}</h1>
<p>${reviewPill(r, base, used)} · ${t("decision")} ${r.decisionId} · made ${esc(fmtTime(r.madeAtMs, base))}${r.trigger?.kind === "manual" ? ` ${t("on-request")}${r.trigger.by ? ` by ${esc(r.trigger.by)}` : ""}` : ""}${r.strategy ? ` · regions pace it with ${t(strategyKey(r.strategy), r.strategy)}` : ""} · covers ${t("alpha", "α")} = ${r.alpha} of each region's forecast · ${t("niw-buffer")} ${t("beta", "β")} = ${r.beta}${base === "relative" ? " · <em>times are hours from the trace start (the source has no calendar)</em>" : ""}</p>
<p class="summary">${summary}</p>
${reviewForms}
${r.acks.length > 0 ? `<p class="muted">Regions: ${r.acks.map((a) => `${esc(a.region)} ${a.accepted ? "accepted" : `refused${a.error ? ` (${esc(a.error)})` : ""}`}`).join(", ")}.</p>` : ""}
<h2>Cost</h2>
${costSection(r, t)}
${r.unmet.length > 0 ? `<h2 class="warn">Could not be met</h2><ul>${r.unmet.map((u) => `<li class="warn">${esc(u.kind)} ${esc([u.model, u.region, u.gpu].filter(Boolean).join(" @ "))}: ${fmt(u.amount, 1)} ${u.kind === "capacity" ? "GPUs" : "tokens/s"} — ${esc(u.why)}</li>`).join("")}</ul>` : ""}
${warnings.length > 0 ? `<h2>Warnings</h2><ul class="warnings">${warnings.map((g) => `<li>${g.subjects.length > 1 ? `<strong>${g.count} series</strong>: ` : g.subjects.length === 1 ? `${esc(g.subjects[0]!)}: ` : g.count > 1 ? `<strong>${g.count}×</strong> ` : ""}${esc(g.text)}${g.subjects.length > 1 ? ` <span class="muted">(${esc(g.subjects.slice(0, 12).join(", "))}${g.subjects.length > 12 ? ", …" : ""})</span>` : ""}</li>`).join("")}</ul>` : ""}
<h2>Changes (every endpoint)</h2>
<table class="changes"><tr><th class="l">model</th><th class="l">region</th><th class="l">GPU</th><th>now</th><th>target</th><th>change</th><th>${t("own-spot")}</th><th>${t("other-spot")}</th><th>${t("new-vms")}</th><th>${t("to-spot")}</th><th>${t("scale-out")}</th></tr>
${changes.map((a) => { const d = a.target - a.current; return `<tr class="${d > 0 ? "up" : d < 0 ? "down" : "unchanged"}"><td class="l">${esc(poolLabel(a.model))}</td><td class="l">${esc(a.region)}</td><td class="l">${esc(a.gpu)}</td><td>${a.current}</td><td>${a.target}</td><td class="d">${d > 0 ? `+${d}` : d < 0 ? `${d}` : "unchanged"}</td><td>${a.reclaimSameModel}</td><td>${a.reclaimOtherModel}</td><td>${a.newInstances}</td><td>${a.donate}</td><td>${a.expectedScaleOutMs === undefined ? "—" : a.expectedScaleOutMs < 1000 ? `${Math.round(a.expectedScaleOutMs)} ms` : `${fmt(a.expectedScaleOutMs / 1000, 1)} s`}</td></tr>`; }).join("\n")}</table>
<p class="muted">"Expected scale-out" is the time for one more instance to serve, decision to serving, as its region reports it: the last scale-out it measured, else the data plane's ideal time to move the model over one link ("—" when the region cannot say, e.g. a static region).</p>
${sloSection(r, base, t)}
<h2>History vs forecast</h2>
<p class="muted">Interactive load (${t("iw")}) per (model, region) in ${t("tokens-per-s")}, 10-minute means. The shaded hour is the one planned: the forecast line and its ${t("band", "10–90% band")}.${actualNote}${r.forecasts.length > series.length ? ` Showing the ${series.length} largest of ${r.forecasts.length}.` : ""}</p>
${series.length > 0 ? `<div class="charts">${series.map((f) => { const why = actualWhy(f); return forecastChart({ title: `${f.model} @ ${f.region} — next hour's peak ${fmtNum(f.peak.mean)} tokens/s (10–90%: ${fmtNum(f.peak.lower)}–${fmtNum(f.peak.upper)}; ${f.method})`, unit: "tokens/s", timeBase: base, stepMs: f.stepMs, history: f.historyWindows, forecastStartMs: forecastStartMs(r, f), forecast: f.forecastSteps, ...(ctx.actuals?.get(`${f.model}\t${f.region}`) ? { actual: ctx.actuals.get(`${f.model}\t${f.region}`)! } : {}), ...(why === undefined ? {} : { actualNote: why }) }); }).join("\n")}</div>` : `<p class="warn">No (model, region) had interactive history to forecast: the plan covers minimums and the NIW buffer only.</p>`}
<h2>Forecasts</h2>
${lastHourSummary(r, base, t)}
<table class="forecasts"><tr><th class="l">model @ region</th><th class="l">${t("method")}</th><th>${t("peak")} (tokens/s)</th><th>${t("band", "10%")}</th><th>${t("band", "90%")}</th><th>${t("niw-buffer")}</th><th>${t("f")}</th><th class="l">${r.forecasts.some((f) => f.components !== undefined) ? t("components") : "components"}</th><th>${t("last-hour", "last hour: forecast")}</th><th>actual</th><th>error</th><th class="l">note</th></tr>
${r.forecasts.slice(0, 400).map((f) => { const lh = lastHourCells(f, base); const note = [f.fallbackReason ?? (f.gapWindowsFilled > 0 ? `${f.gapWindowsFilled} empty windows filled` : ""), lh.note].filter((x) => x !== "").join("; "); return `<tr><td class="l">${esc(f.model)} @ ${esc(f.region)}</td><td class="l">${t(methodKey(f.method), f.method)}</td><td>${fmt(f.peak.mean, 1)}</td><td>${fmt(f.peak.lower, 1)}</td><td>${fmt(f.peak.upper, 1)}</td><td>${fmt(f.bufferTokensPerS, 1)}</td><td>${fmt(f.demandTokensPerS, 1)}</td>${componentsCell(f)}${lh.cells}<td class="l">${esc(note)}</td></tr>`; }).join("\n")}</table>
<h2>Instances per region</h2>
<table><tr><th class="l">region</th><th>now</th><th>target</th></tr>${[...byRegion].map(([region, x]) => `<tr><td class="l">${esc(region)}</td><td>${x.current}</td><td>${x.target}</td></tr>`).join("")}</table>
<h2>Spot</h2>
<table><tr><th class="l">region / GPU</th><th>capacity GPUs</th><th>planned GPUs</th><th>donated to ${t("spot")}</th></tr>${r.spot.map((s) => `<tr><td class="l">${esc(s.region)} / ${esc(s.gpu)}</td><td>${s.capacityGpus}</td><td>${s.plannedGpus}</td><td>${s.donatedGpus}</td></tr>`).join("")}</table>
<h2>Solver</h2>
<table><tr><th class="l">${t("solver-path")}</th><th class="l">status</th><th>${t("objective")} (${esc(r.cost.currency ?? "USD")})</th><th>${t("lower-bound")}</th><th>${t("gap")}</th><th>solve ms</th><th>endpoints</th></tr>
<tr><td class="l">${esc(r.solver.path)}</td><td class="l">${esc(r.solver.status)}</td><td>${fmt(r.solver.objective)}</td><td>${fmt(r.solver.bound)}</td><td>${fmt(100 * r.solver.gap, 3)}%</td><td>${fmt(r.solver.solveMs, 1)}</td><td>${r.solver.endpoints}</td></tr></table>
${glossarySection(used)}`;
  return pageShell(`tidegate plan ${r.id} — ${hourText}`, body, v);
}
