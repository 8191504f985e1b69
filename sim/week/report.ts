/**
 * Replay reports: per run a JSON file (the WeekResult) and an HTML page with inline-SVG charts; across runs a
 * comparison page (and JSON) with every figure next to the reactive baseline's.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { WeekResult } from "./result.js";
import { barChart as bars, esc, lineChart as timeChart } from "../../planner/charts.js";

const HOUR_MS = 3_600_000;

/** Hourly values (null: no data that hour) over hours since the run's start, in the planner's chart kit. */
function lineChart(title: string, series: { name: string; values: readonly (number | null)[] }[], opts: { yLabel: string; log?: boolean }): string {
  const points = (values: readonly (number | null)[]) => values.map((v, i) => [i * HOUR_MS, v ?? Number.NaN] as [number, number]);
  return timeChart({ title, unit: opts.yLabel, timeBase: "relative", series: series.map((s) => ({ name: s.name, points: points(s.values) })), log: opts.log === true, emptyWhy: "no hour had any" });
}

/** One group per category, one bar per series (null: no bar). */
function barChart(title: string, categories: string[], series: { name: string; values: readonly (number | null)[] }[], opts: { yLabel: string }): string {
  return bars({ title, unit: opts.yLabel, categories, series: series.map((s) => ({ name: s.name, values: s.values.map((v) => v ?? Number.NaN) })) });
}

const STYLE = "body{font-family:system-ui,sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}";

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${STYLE}</style></head><body><h1>${esc(title)}</h1>${body}</body></html>\n`;
}

function table(head: string[], rows: (string | number)[][]): string {
  return `<table><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>${rows.map((r) => `<tr>${r.map((c) => `<td>${esc(String(c))}</td>`).join("")}</tr>`).join("")}</table>`;
}

/** The HTML page of one run. */
export function runHtml(r: WeekResult): string {
  const models = Object.keys(r.models);
  const t = r.totals;
  const body = [
    `<p>strategy <b>${esc(r.strategy)}</b> · planner ${esc(r.planner)} · seed ${r.seed} · ${r.days} days · ${r.requests.total.toLocaleString("en")} requests (${r.requests.batch.toLocaleString("en")} batch) · ${r.requestsPerWallS.toLocaleString("en")} requests per wall second</p>`,
    table(["instance-hours", "GPU-hours", "GPU-hours provisioning", "spot instance-hours", "scaling actions", "IW TTFT p50/p95/p99 ms", "IW E2E p50/p95/p99 ms", "batch within deadline"], [[t.instanceHours, t.gpuHours, t.provisioningGpuHours, t.spotInstanceHours, t.scalingActions, `${r.interactive.ttftMs.p50} / ${r.interactive.ttftMs.p95} / ${r.interactive.ttftMs.p99}`, `${r.interactive.e2eMs.p50} / ${r.interactive.e2eMs.p95} / ${r.interactive.e2eMs.p99}`, `${r.batch.withinDeadline} / ${r.batch.submitted} (late ${r.batch.late}, missed ${r.batch.missedDeadlineUndone})`]]),
    "<h2>Per model</h2>",
    table(["model", "instance-hours", "GPU-h provisioning", "spot instance-h", "TTFT p50", "p95", "p99", "TPOT p50", "p95", "E2E p50", "p95", "p99", "requests"], models.map((m) => {
      const x = r.models[m]!;
      return [m, x.instanceHours, x.provisioningGpuHours, x.spotInstanceHours, x.ttftMs.p50, x.ttftMs.p95, x.ttftMs.p99, x.tpotMs.p50, x.tpotMs.p95, x.e2eMs.p50, x.e2eMs.p95, x.e2eMs.p99, x.ttftMs.count];
    })),
    `<h2>SLO</h2><p>${r.slo.met ? "Every model met its SLO" : `SLO missed by ${esc(r.slo.unmetModels.join(", "))}`} · attainment ${(r.slo.attainment * 100).toFixed(2)}% of interactive requests · ${r.slo.violatedHours} hours in violation (some model's attainment below its percentile)</p>`,
    table(["model", "target TTFT ms", "TPOT ms", "percentile", "TTFT at it", "TPOT at it", "met", "attainment", "hours in violation"], models.map((m) => {
      const x = r.models[m]!.slo;
      return [m, x.ttftMs, x.tpotMs, x.percentile, x.ttftAtPercentileMs, x.tpotAtPercentileMs, x.met ? "yes" : "no", `${(x.attainment * 100).toFixed(2)}%`, `${x.violatedHours} / ${x.hours}`];
    })),
    lineChart("SLO attainment per hour", models.map((m) => ({ name: m, values: r.hourly.models[m]!.sloAttainment })), { yLabel: "share of requests meeting the SLO" }),
    "<h2>Per model and region</h2>",
    table(["model", "region", "instance-hours", "GPU-h provisioning", "spot instance-h"], models.flatMap((m) => Object.entries(r.models[m]!.byRegion).map(([reg, v]) => [m, reg, v.instanceHours, v.provisioningGpuHours, v.spotInstanceHours]))),
    ...models.map((m) => lineChart(`${m}: instances (all regions) and the planner's targets`, [{ name: "instances", values: r.hourly.models[m]!.instances }, { name: "target", values: r.hourly.targets[m]! }], { yLabel: "instances" })),
    lineChart("Interactive p95 TTFT per hour", models.map((m) => ({ name: m, values: r.hourly.models[m]!.p95TtftMs })), { yLabel: "ms", log: true }),
    lineChart("Interactive tokens/s per hour", models.map((m) => ({ name: m, values: r.hourly.models[m]!.tokensPerS })), { yLabel: "tokens/s" }),
    `<h2>Scaling actions</h2>`,
    table(["kind", "count"], Object.entries(t.actionsByKind)),
    table(["reason", "count"], Object.entries(t.actionsByReason)),
  ];
  return page(`tidegate replay — ${r.strategy}`, body.join("\n"));
}

/** The comparison page across strategies (the first `reactive` run is the baseline). */
export function comparisonHtml(results: WeekResult[], extra = ""): string {
  const base = results.find((r) => r.strategy === "reactive");
  const ratio = (v: number, b: number | undefined) => (b === undefined || b === 0 ? "" : `${((v / b - 1) * 100).toFixed(1)}%`);
  const models = Object.keys(results[0]?.models ?? {});
  const body = [
    table(["strategy", "instance-hours", "vs reactive", "GPU-h provisioning", "vs reactive", "spot instance-h", "IW p95 TTFT ms", "vs reactive", "IW p99 TTFT", "IW p95 TPOT", "IW p95 E2E", "SLO met", "SLO attainment", "hours in violation", "batch all within deadline", "scaling actions"], results.map((r) => [
      r.strategy, r.totals.instanceHours, ratio(r.totals.instanceHours, base?.totals.instanceHours), r.totals.provisioningGpuHours, ratio(r.totals.provisioningGpuHours, base?.totals.provisioningGpuHours), r.totals.spotInstanceHours, r.interactive.ttftMs.p95, ratio(r.interactive.ttftMs.p95, base?.interactive.ttftMs.p95), r.interactive.ttftMs.p99, r.interactive.tpotMs.p95, r.interactive.e2eMs.p95, r.slo.met ? "yes" : `no (${r.slo.unmetModels.join(", ")})`, `${(r.slo.attainment * 100).toFixed(2)}%`, r.slo.violatedHours, String(r.batch.allWithinDeadline), r.totals.scalingActions,
    ])),
    barChart("Instance-hours per model", models, results.map((r) => ({ name: r.strategy, values: models.map((m) => r.models[m]!.instanceHours) })), { yLabel: "instance-hours" }),
    barChart("GPU-hours lost to provisioning per model", models, results.map((r) => ({ name: r.strategy, values: models.map((m) => r.models[m]!.provisioningGpuHours) })), { yLabel: "GPU-hours" }),
    barChart("Interactive p95 TTFT per model", models, results.map((r) => ({ name: r.strategy, values: models.map((m) => r.models[m]!.ttftMs.p95) })), { yLabel: "ms" }),
    ...models.map((m) => lineChart(`${m}: instances per hour`, results.map((r) => ({ name: r.strategy, values: r.hourly.models[m]!.instances })), { yLabel: "instances" })),
    lineChart("Interactive p95 TTFT per hour (first model)", results.map((r) => ({ name: r.strategy, values: r.hourly.models[models[0]!]!.p95TtftMs })), { yLabel: "ms", log: true }),
    extra,
    `<p>Per-run pages: ${results.map((r) => `<a href="${esc(r.strategy)}.html">${esc(r.strategy)}</a>`).join(" · ")}</p>`,
  ];
  return page("tidegate replay — strategies compared", body.join("\n"));
}

/** JSON replacer: a percentile that fell on unserved requests (+Infinity) is written "Infinity", not null. */
function infinite(_key: string, v: unknown): unknown {
  return v === Number.POSITIVE_INFINITY ? "Infinity" : v;
}

/** Writes `<strategy>.json` and `.html` per run and `comparison.{json,html}` when there is more than one run. */
export function writeReports(dir: string, results: WeekResult[], extra?: { html?: string; json?: unknown }): string[] {
  mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (const r of results) {
    const base = join(dir, r.strategy);
    writeFileSync(`${base}.json`, JSON.stringify(r, infinite, 1));
    writeFileSync(`${base}.html`, runHtml(r));
    files.push(`${base}.json`, `${base}.html`);
  }
  if (results.length > 1 || extra !== undefined) {
    writeFileSync(join(dir, "comparison.json"), JSON.stringify({ runs: results.map(({ hourly: _h, ...rest }) => rest), ...(extra?.json === undefined ? {} : { extra: extra.json }) }, infinite, 1));
    writeFileSync(join(dir, "comparison.html"), comparisonHtml(results, extra?.html ?? ""));
    files.push(join(dir, "comparison.json"), join(dir, "comparison.html"));
  }
  return files;
}
