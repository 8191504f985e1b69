/**
 * The plans index (/plans): a timeline of the planned hours — cost per hour in the plans' currency, demand left
 * unmet, last hour's forecast error and instances per region — as charts and as a table linking each hour's plan,
 * filtered by model and region (plain links, no scripts), for the running configuration (plans kept for another one are
 * counted and a link shows them). An hour whose forecast error cannot be judged yet shows
 * "not yet" (never 0), the error chart's axis is in percent and says "no data yet" and why while it has nothing to
 * draw, and the page's terms link to a glossary (glossary.ts). Pure: reports in, HTML out.
 */
import type { PlanReport } from "./report.js";
import type { PlanFleet } from "./fingerprint.js";
import { esc, fmtTime, lineChart, type TimeBase } from "./charts.js";
import { glossarySection, term } from "./glossary.js";
import { pageShell, reviewPill, type PlanPageContext } from "./html.js";

/** A filter on the index; absent fields match everything. */
export interface IndexFilter {
  model?: string;
  region?: string;
  /** "all": the plans of every configuration the store keeps, not only the running one's (`?fleet=all`). */
  fleet?: "all";
}

/** Which configurations' plans the index shows (routes.ts `fleet`): the running one, and how many plans it hides. */
export interface IndexFleets {
  current?: PlanFleet;
  /** Plans the store keeps for other configurations, not shown. */
  hidden: number;
  /** Every configuration's plans are shown. */
  all?: boolean;
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
  /** When no series had one because the hour judged is still running: why (the report's "not yet" note). */
  lastHourNotYet: string | undefined;
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
  const kept = r.forecasts.filter((x) => keep(f, x.model, x.region));
  const errs = kept.filter((x) => x.lastHour !== null).map((x) => Math.abs(x.lastHour!.errorPct));
  const notYet = errs.length === 0 ? kept.find((x) => x.lastHourNote?.state === "not-yet")?.lastHourNote?.why : undefined;
  const instances = new Map<string, number>();
  for (const a of actions) instances.set(a.region, (instances.get(a.region) ?? 0) + a.target);
  return { report: r, hourMs: Math.floor(r.madeAtMs / 600_000) * 600_000, cost: r.cost.breakdown === undefined && !filtered ? r.cost.total : cost, unmetTokensPerS: unmet, lastHourErrorPct: errs.length > 0 ? errs.reduce((s, e) => s + e, 0) / errs.length : undefined, lastHourNotYet: notYet, instances };
}

/** The index's URL under a filter. */
function indexHref(f: IndexFilter): string {
  const q = new URLSearchParams();
  if (f.model !== undefined) q.set("model", f.model);
  if (f.region !== undefined) q.set("region", f.region);
  if (f.fleet !== undefined) q.set("fleet", f.fleet);
  const s = q.toString();
  return `/plans${s ? `?${s}` : ""}`;
}

/** One line on which configurations' plans are shown, with a link to the others (nothing when all are one). */
function fleetLine(fleets: IndexFleets | undefined, f: IndexFilter): string {
  if (fleets?.current === undefined) return "";
  const about = (x: PlanFleet) => `regions ${x.regions.join(", ")}; models ${x.models.join(", ")}`;
  if (fleets.all === true) return `<p class="fleets">Plans of every configuration this store keeps (this one: ${esc(about(fleets.current))}). <a href="${esc(indexHref({ ...f, fleet: undefined }))}">Only this configuration's</a></p>`;
  if (fleets.hidden === 0) return "";
  return `<p class="fleets">Plans of this configuration (${esc(about(fleets.current))}). ${fleets.hidden} plan${fleets.hidden === 1 ? "" : "s"} made for another configuration in this store ${fleets.hidden === 1 ? "is" : "are"} not shown: <a href="${esc(indexHref({ ...f, fleet: "all" }))}">show every plan</a></p>`;
}

function filterLinks(kind: "model" | "region", values: readonly string[], f: IndexFilter): string {
  const href = (v: string | undefined) => indexHref({ ...f, [kind]: v });
  const cur = f[kind];
  return `<span class="filters">${kind}: <a class="${cur === undefined ? "on" : ""}" href="${esc(href(undefined))}">all</a>${values.map((v) => `<a class="${cur === v ? "on" : ""}" href="${esc(href(v))}">${esc(v)}</a>`).join("")}</span>`;
}

/** The index page. `reports` newest first (as PlanStore.list gives them). */
export function renderPlansIndex(reports: readonly PlanReport[], f: IndexFilter, ctx: Pick<PlanPageContext, "viewer" | "notice"> & { canPlanNow?: boolean; fleets?: IndexFleets } = {}): string {
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
  const used = new Set<string>();
  const t = (key: string, shown?: string) => term(key, used, shown);
  const planNow = v?.role === "admin" && v.csrf !== undefined && ctx.canPlanNow === true ? `<form method="post" action="/plans/now" class="plan-now"><input type="hidden" name="csrf" value="${esc(v.csrf)}"><button type="submit">Plan now</button> <span class="muted">runs the planner once, off-schedule${reports[0]?.advisory ? "; the plan waits for review (advisory mode)" : ""}</span></form>` : "";
  const charts =
    rows.length === 0
      ? ""
      : `<div class="charts">
${lineChart({ title: `cost per hour (${currency})`, unit: `${currency}/hour`, timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "cost", points: oldestFirst.map((x) => [x.hourMs, x.cost]) }] })}
${lineChart({ title: "target instances per region", unit: "instances", timeBase: base, stepped: true, holdLastMs: hold, series: shownRegions.map((reg) => ({ name: reg, points: oldestFirst.map((x) => [x.hourMs, x.instances.get(reg) ?? 0] as [number, number]) })) })}
${lineChart({ title: "demand the plan could not cover", unit: "tokens/s", timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "unmet", points: oldestFirst.map((x) => [x.hourMs, x.unmetTokensPerS]) }] })}
${lineChart({ title: "last hour's forecast error (mean |forecast − actual| / actual of the peak)", unit: "%", timeBase: base, stepped: true, holdLastMs: hold, series: [{ name: "|error|", points: oldestFirst.map((x) => [x.hourMs, x.lastHourErrorPct ?? Number.NaN]) }], emptyWhy: "an hour's error is known once that hour has ended" })}
</div>`;
  const table = `<table class="hours"><tr><th class="l">hour${base === "relative" ? " (from trace start)" : " (UTC)"}</th><th class="l">plan</th><th>cost (${esc(currency)}/hour)</th><th>${t("unmet")} (tokens/s)</th><th>${t("last-hour")}</th>${shownRegions.map((reg) => `<th>${esc(reg)} instances</th>`).join("")}<th class="l">solver</th></tr>
${rows.map((x) => `<tr><td class="l"><a href="/plans/${encodeURIComponent(x.report.id)}">${esc(fmtTime(x.hourMs, base))}</a></td><td class="l">${reviewPill(x.report, base, used)}${x.report.trigger?.kind === "manual" ? ` <span class="pill">${t("on-request")}</span>` : ""}</td><td>${x.cost.toFixed(2)}</td><td>${x.unmetTokensPerS.toFixed(1)}</td><td>${x.lastHourErrorPct !== undefined ? `${x.lastHourErrorPct.toFixed(1)}%` : x.lastHourNotYet !== undefined ? `<span class="not-yet" title="${esc(x.lastHourNotYet)}">not yet</span>` : "—"}</td>${shownRegions.map((reg) => `<td>${x.instances.get(reg) ?? 0}</td>`).join("")}<td class="l">${esc(x.report.solver.status)}${x.report.solver.gap > 1e-6 ? ` (${t("gap")} ${(100 * x.report.solver.gap).toFixed(2)}%)` : ""}</td></tr>`).join("\n")}</table>`;
  const body = `${ctx.notice ? `<p class="notice">${esc(ctx.notice)}</p>` : ""}
<h1>Plans, hour by hour</h1>
${fleetLine(ctx.fleets, f)}
${planNow}
<p>${filterLinks("model", models, f)}<br>${filterLinks("region", regions, f)}</p>
${rows.length === 0 ? `<p>No plans yet: the planner makes one at start and then every interval.</p>` : `<p class="muted">Newest first. Costs are GPU-hour prices × GPUs held plus the hour's VM and model starts, after spot reclaims${f.model || f.region ? ", for the endpoints the filter keeps" : ""}. ${t("last-hour", "Forecast error")}: mean |forecast − actual| / actual of last hour's peak over the series shown, once that hour has ended ("not yet" before).</p>${charts}${table}`}
${glossarySection(used)}`;
  return pageShell("tidegate plans", body, v);
}
