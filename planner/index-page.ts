/**
 * The plans index (/plans): a timeline of the planned hours — cost per hour in the plans' currency, demand left
 * unmet, last hour's forecast error and instances per region — as charts and as a table linking each hour's plan,
 * filtered by model and region (plain links, no scripts). Pure: reports in, HTML out.
 */
import type { PlanReport } from "./report.js";
import { esc, fmtTime, lineChart, type TimeBase } from "./charts.js";
import { pageShell, reviewPill, type PlanPageContext } from "./html.js";

/** A filter on the index; absent fields match everything. */
export interface IndexFilter {
  model?: string;
  region?: string;
}

/** One hour of the timeline, over the actions and forecasts the filter keeps. */
export interface HourRow {
  report: PlanReport;
  hourMs: number;
  /** Holding + starts after spot, in the plan's currency (the whole plan's when unfiltered). */
  cost: number;
  /** Tokens/s of demand the plan could not cover. */
  unmetTokensPerS: number;
  /** Mean |error| of last hour's peak forecasts, % (undefined when no series had one). */
  lastHourErrorPct: number | undefined;
  /** Target instances per region. */
  instances: Map<string, number>;
}

const keep = (f: IndexFilter, model: string | undefined, region: string | undefined) => (f.model === undefined || model === undefined || model === f.model) && (f.region === undefined || region === undefined || region === f.region);

/** The figures of one report under a filter. */
export function hourRow(r: PlanReport, f: IndexFilter): HourRow {
  const filtered = f.model !== undefined || f.region !== undefined;
  const actions = r.actions.filter((a) => keep(f, a.model, a.region));
  const cost = filtered || r.cost.breakdown === undefined ? actions.reduce((s, a) => s + (a.cost ?? 0), 0) : r.cost.breakdown.afterSpot;
  const unmet = r.unmet.filter((u) => u.kind === "cover" && keep(f, u.model, u.region)).reduce((s, u) => s + u.amount, 0);
  const errs = r.forecasts.filter((x) => x.lastHour !== null && keep(f, x.model, x.region)).map((x) => Math.abs(x.lastHour!.errorPct));
  const instances = new Map<string, number>();
  for (const a of actions) instances.set(a.region, (instances.get(a.region) ?? 0) + a.target);
  return { report: r, hourMs: Math.floor(r.madeAtMs / 600_000) * 600_000, cost: r.cost.breakdown === undefined && !filtered ? r.cost.total : cost, unmetTokensPerS: unmet, lastHourErrorPct: errs.length > 0 ? errs.reduce((s, e) => s + e, 0) / errs.length : undefined, instances };
}

function filterLinks(kind: "model" | "region", values: readonly string[], f: IndexFilter): string {
  const href = (v: string | undefined) => {
    const q = new URLSearchParams();
    const next = { ...f, [kind]: v };
    if (next.model !== undefined) q.set("model", next.model);
    if (next.region !== undefined) q.set("region", next.region);
    const s = q.toString();
    return `/plans${s ? `?${s}` : ""}`;
  };
  const cur = f[kind];
  return `<span class="filters">${kind}: <a class="${cur === undefined ? "on" : ""}" href="${esc(href(undefined))}">all</a>${values.map((v) => `<a class="${cur === v ? "on" : ""}" href="${esc(href(v))}">${esc(v)}</a>`).join("")}</span>`;
}

/** The index page. `reports` newest first (as PlanStore.list gives them). */
export function renderPlansIndex(reports: readonly PlanReport[], f: IndexFilter, ctx: Pick<PlanPageContext, "viewer" | "notice"> & { canPlanNow?: boolean } = {}): string {
  const models = [...new Set(reports.flatMap((r) => r.actions.map((a) => a.model)))].sort();
  const regions = [...new Set(reports.flatMap((r) => r.actions.map((a) => a.region)))].sort();
  const shownRegions = f.region === undefined ? regions : regions.filter((x) => x === f.region);
  const rows = reports.map((r) => hourRow(r, f));
  const base: TimeBase = reports[0]?.timeBase ?? "calendar";
  const currency = reports[0]?.cost.currency ?? "USD";
  const oldestFirst = [...rows].reverse();
  // Every chart spans the same hours: each plan's value holds for its interval.
  const hold = reports[0]?.intervalMs ?? 3_600_000;
  const v = ctx.viewer;
  const planNow = v?.role === "admin" && v.csrf !== undefined && ctx.canPlanNow === true ? `<form method="post" action="/plans/now" class="plan-now"><input type="hidden" name="csrf" value="${esc(v.csrf)}"><button type="submit">Plan now</button> <span class="muted">runs the planner once, off-schedule${reports[0]?.advisory ? "; the plan waits for review (advisory mode)" : ""}</span></form>` : "";
  const charts =
    rows.length === 0
      ? ""
      : `<div class="charts">
${lineChart({ title: `cost per hour (${currency})`, unit: `${currency}/hour`, timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "cost", points: oldestFirst.map((x) => [x.hourMs, x.cost]) }] })}
${lineChart({ title: "target instances per region", unit: "instances", timeBase: base, stepped: true, holdLastMs: hold, series: shownRegions.map((reg) => ({ name: reg, points: oldestFirst.map((x) => [x.hourMs, x.instances.get(reg) ?? 0] as [number, number]) })) })}
${lineChart({ title: "demand the plan could not cover", unit: "tokens/s", timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "unmet", points: oldestFirst.map((x) => [x.hourMs, x.unmetTokensPerS]) }] })}
${lineChart({ title: "last hour's forecast error (mean |forecast − actual| / actual of the peak)", unit: "%", timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "|error|", points: oldestFirst.map((x) => [x.hourMs, x.lastHourErrorPct ?? Number.NaN]) }] })}
</div>`;
  const table = `<table class="hours"><tr><th class="l">hour${base === "relative" ? " (from trace start)" : " (UTC)"}</th><th class="l">plan</th><th>cost (${esc(currency)}/hour)</th><th>unmet (tokens/s)</th><th>last hour's forecast error</th>${shownRegions.map((reg) => `<th>${esc(reg)} instances</th>`).join("")}<th class="l">solver</th></tr>
${rows.map((x) => `<tr><td class="l"><a href="/plans/${encodeURIComponent(x.report.id)}">${esc(fmtTime(x.hourMs, base))}</a></td><td class="l">${reviewPill(x.report, base)}${x.report.trigger?.kind === "manual" ? ` <span class="pill">on request</span>` : ""}</td><td>${x.cost.toFixed(2)}</td><td>${x.unmetTokensPerS.toFixed(1)}</td><td>${x.lastHourErrorPct === undefined ? "—" : `${x.lastHourErrorPct.toFixed(1)}%`}</td>${shownRegions.map((reg) => `<td>${x.instances.get(reg) ?? 0}</td>`).join("")}<td class="l">${esc(x.report.solver.status)}${x.report.solver.gap > 1e-6 ? ` (gap ${(100 * x.report.solver.gap).toFixed(2)}%)` : ""}</td></tr>`).join("\n")}</table>`;
  const body = `${ctx.notice ? `<p class="notice">${esc(ctx.notice)}</p>` : ""}
<h1>Plans, hour by hour</h1>
${planNow}
<p>${filterLinks("model", models, f)}<br>${filterLinks("region", regions, f)}</p>
${rows.length === 0 ? `<p>No plans yet: the planner makes one at start and then every interval.</p>` : `<p class="muted">Newest first. Costs are GPU-hour prices × GPUs held plus the hour's VM and model starts, after spot reclaims${f.model || f.region ? ", for the endpoints the filter keeps" : ""}. Forecast error: mean |forecast − actual| / actual of last hour's peak over the series shown.</p>${charts}${table}`}`;
  return pageShell("tidegate plans", body, v);
}
