/** The pure page builders: warnings grouped, times, the index's filtered figures, reports from before issue 16. */
import { describe, expect, it } from "vitest";
import { barChart, fmtTime, forecastChart, lineChart, niceStep } from "./charts.js";
import { groupWarnings, renderPlanHtml } from "./html.js";
import { hourRow, renderPlansIndex } from "./index-page.js";
import type { PlanReport } from "./report.js";

function report(over: Partial<PlanReport> = {}): PlanReport {
  return {
    id: "plan-7-abc", decisionId: 7, madeAtMs: Date.UTC(2026, 10, 23, 14, 0), intervalMs: 3_600_000, advisory: false, alpha: 0.8, beta: 0.2, forecasts: [],
    solver: { path: "mip", status: "optimal", objective: 30, bound: 30, gap: 0, solveMs: 1, endpoints: 2 },
    actions: [
      { model: "a", region: "east", gpu: "g", current: 2, target: 2, reclaimSameModel: 0, reclaimOtherModel: 0, newInstances: 0, donate: 0, cost: 10 },
      { model: "b", region: "west", gpu: "g", current: 1, target: 3, reclaimSameModel: 1, reclaimOtherModel: 0, newInstances: 1, donate: 0, cost: 20 },
    ],
    spot: [], cost: { holdPerInterval: 28, starts: 2, total: 30 }, unmet: [{ kind: "cover", model: "b", region: "west", amount: 5, why: "x" }], warnings: [], acks: [],
    ...over,
  };
}

describe("plan pages", () => {
  it("group warnings by what they say", () => {
    const w = Array.from({ length: 12 }, (_, i) => `m${i}@r: no interactive history in the last 8 days; planned for the NIW buffer (0.0 tokens/s) only`);
    w.push("m1@r: 3 ten-minute window(s) without data were filled", "m2@r: 5 ten-minute window(s) without data were filled", "a fleet-wide note");
    const g = groupWarnings(w);
    expect(g).toHaveLength(3);
    expect(g[0]).toMatchObject({ count: 12, text: "no interactive history in the last 8 days; planned for the NIW buffer (0.0 tokens/s) only" });
    expect(g[0]!.subjects).toHaveLength(12);
    expect(g[1]).toMatchObject({ count: 2, text: "3 ten-minute window(s) without data were filled (values differ per series)" });
    const html = renderPlanHtml(report({ warnings: w }));
    expect(html).toContain("<strong>12 series</strong>: no interactive history");
    expect(html.match(/<li>/g)).toHaveLength(3);
  });

  it("show calendar times in UTC and trace times as hours from the start", () => {
    expect(fmtTime(Date.UTC(2026, 10, 23, 14, 0))).toBe("2026-11-23 14:00 UTC");
    expect(fmtTime(336 * 3_600_000, "relative")).toBe("hour 336");
    expect(fmtTime(336.5 * 3_600_000, "relative")).toBe("hour 336:30");
    expect([niceStep(7), niceStep(900), niceStep(0.3)]).toEqual([2, 500, 0.1]);
  });

  it("draw the actual load only when some of it is known", () => {
    const base = { title: "t", unit: "tokens/s", timeBase: "calendar" as const, stepMs: 600_000, history: Array.from({ length: 144 }, () => 5), forecastStartMs: 144 * 600_000, forecast: Array.from({ length: 6 }, () => ({ mean: 5, lower: 4, upper: 6 })) };
    expect(forecastChart(base)).not.toContain('class="actual"');
    expect(forecastChart({ ...base, actual: Array(6).fill(Number.NaN) })).not.toContain('class="actual"');
    expect(forecastChart({ ...base, actual: [5, 6, Number.NaN, Number.NaN, Number.NaN, Number.NaN] })).toContain('class="actual"');
  });

  it("filter the index's figures by model and region", () => {
    const r = report();
    expect(hourRow(r, {}).cost).toBe(30);
    expect(hourRow(r, { model: "b" })).toMatchObject({ cost: 20, unmetTokensPerS: 5 });
    expect(hourRow(r, { region: "east" })).toMatchObject({ cost: 10, unmetTokensPerS: 0 });
    expect([...hourRow(r, { model: "a" }).instances]).toEqual([["east", 2]]);
    const html = renderPlansIndex([r], { region: "west" });
    expect(html).toContain("<th>west instances</th>");
    expect(html).not.toContain("<th>east instances</th>");
  });

  it("draw identical series once, named together, so equal regions do not hide under one colour", () => {
    const act = (region: string, target: number) => ({ model: "a", region, gpu: "g", current: 2, target, reclaimSameModel: 0, reclaimOtherModel: 0, newInstances: 0, donate: 0, cost: 10 });
    const hour = (i: number, west: number) => report({ id: `plan-${i}`, decisionId: i, madeAtMs: Date.UTC(2026, 10, 23, 10 + i, 0), actions: [act("east", 8), act("central", 8), act("west", west)] });
    const chartOf = (html: string) => html.split("<svg ").find((c) => c.includes('aria-label="target instances per region (instances)"'))!;
    // Three regions with the same targets every hour: one line, its legend naming all three.
    const equal = chartOf(renderPlansIndex([hour(2, 8), hour(1, 8)], {}));
    expect(equal.match(/<polyline class="series"/g)).toHaveLength(1);
    expect(equal).toContain(">central = east = west</text>");
    // West differs in one hour: its own line and colour; east and central still share one.
    const apart = chartOf(renderPlansIndex([hour(2, 6), hour(1, 8)], {}));
    expect(apart.match(/<polyline class="series"/g)).toHaveLength(2);
    expect(apart).toContain(">central = east</text>");
    expect(apart).toContain(">west</text>");
    expect(new Set([...apart.matchAll(/<polyline class="series"[^>]*stroke="([^"]+)"/g)].map((m) => m[1])).size).toBe(2);
  });

  it("render a report stored before cost breakdowns and reviews existed", () => {
    const html = renderPlanHtml(report());
    expect(html).toContain("Cost for this hour: <strong>30.00 USD</strong>");
    expect(html).toContain("sent to regions when made");
    expect(html.match(/<tr class="(up|down|unchanged)">/g)).toHaveLength(2);
  });
});

describe("last hour's error, percent axes and the glossary", () => {
  const series = (lastHour: PlanReport["forecasts"][number]["lastHour"], note?: PlanReport["forecasts"][number]["lastHourNote"]): PlanReport["forecasts"][number] => ({
    model: "a", region: "east", method: "sarima(1,0,1)(1,1,1)24log", peak: { mean: 10, lower: 8, upper: 12 }, niwLastHourTokensPerS: 0, bufferTokensPerS: 0, demandTokensPerS: 12, pointDemandTokensPerS: 10,
    historyWindows: Array(144).fill(5), stepMs: 600_000, forecastSteps: Array(6).fill({ mean: 10, lower: 8, upper: 12 }), lastHour, ...(note === undefined ? {} : { lastHourNote: note }), gapWindowsFilled: 0,
  });
  const notYet = { state: "not-yet" as const, why: "plan-6's hour (2026-11-23 14:00 UTC – 15:00) is still running: its error is computed once it ends at 15:00" };

  it("a plan whose judged hour is still running says 'not yet' and why, never 0%", () => {
    const html = renderPlanHtml(report({ forecasts: [series(null, notYet)] }));
    expect(html).toContain(`<td class="pending" colspan="3" title="${notYet.why.replace(/'/g, "&#39;")}">not yet</td>`);
    expect(html).toMatch(/Last hour&#39;s forecast error<\/a>: <strong>not yet<\/strong> — plan-6&#39;s hour/);
    const table = html.slice(html.indexOf('<table class="forecasts">'), html.indexOf("</table>", html.indexOf('<table class="forecasts">')));
    expect(table).not.toMatch(/\d%<\/td>/); // no error figure, not even 0.0%
    const row = hourRow(report({ forecasts: [series(null, notYet)] }), {});
    expect(row).toMatchObject({ lastHourErrorPct: undefined, lastHourNotYet: notYet.why });
    expect(renderPlansIndex([report({ forecasts: [series(null, notYet)] })], {})).toContain('<span class="not-yet"');
  });

  it("a judged hour shows its figures; a report stored before the hour's plan was kept still renders", () => {
    const html = renderPlanHtml(report({ forecasts: [series({ forecastPeak: 120, actualPeak: 150, errorPct: -20, planId: "plan-6", hourStartMs: Date.UTC(2026, 10, 23, 13), hourEndMs: Date.UTC(2026, 10, 23, 14), recordedWindows: 4, windows: 6 })] }));
    expect(html).toContain("<td>-20.0%</td>");
    expect(html).toContain("actual peak from 4 of 6 ten-minute windows");
    expect(html).toContain("mean |forecast − actual| / actual of the peak 20.0% over 1 series");
    expect(renderPlanHtml(report({ forecasts: [series({ forecastPeak: 1, actualPeak: 2, errorPct: -50 })] }))).toContain("<td>-50.0%</td>");
  });

  it("the forecast-error chart is on a percent axis, and says why when it has nothing to draw", () => {
    const html = renderPlansIndex([report({ forecasts: [series(null, notYet)] })], {});
    const chart = html.slice(html.indexOf("last hour&#39;s forecast error (mean"));
    const ticks = [...chart.slice(0, chart.indexOf("</svg>")).matchAll(/class="tick"[^>]*text-anchor="end">([^<]*)</g)].map((m) => m[1]);
    expect(ticks).toEqual(["0%", "50%", "100%"]);
    expect(chart).toContain("no data yet: an hour&#39;s error is known once that hour has ended");
    const judged = renderPlansIndex([report({ forecasts: [series({ forecastPeak: 11, actualPeak: 10, errorPct: 10 })] })], {});
    expect(judged).not.toContain("no data yet");
  });

  it("every term on the plan page links to a glossary entry with a tooltip", () => {
    const html = renderPlanHtml(report({ strategy: "lt-ua", forecasts: [series(null, notYet)] }));
    const linked = [...html.matchAll(/<a class="term" href="#g-([a-z-]+)" title="([^"]+)">/g)].map((m) => m[1]!);
    const entries = [...html.matchAll(/<dt id="g-([a-z-]+)">/g)].map((m) => m[1]!);
    expect(new Set(linked)).toEqual(new Set(entries));
    for (const k of ["alpha", "beta", "niw-buffer", "strategy-lt-ua", "method-arima", "f", "last-hour"]) expect(entries).toContain(k);
  });
});

describe("the SLO section (issue 31)", () => {
  const slo = { ttftMs: 1000, tpotMs: 100, percentile: 0.95 };
  const cap = { gpu: "g", gpusPerInstance: 4, tokensPerS: 3200, predictedTokensPerS: 4000, requestsPerS: 2.93, batch: 74, mix: { promptTokens: 1155, outputTokens: 211, source: "default" as const }, derivation: "p95 TTFT ≤ 1000 ms, TPOT ≤ 100 ms for 1155/211-token requests: batch 74 (bound by TPOT)" };
  const span = { fromMs: Date.UTC(2026, 10, 23, 13), toMs: Date.UTC(2026, 10, 23, 14) };
  const withSlo = report({
    slo: [
      { model: "a", slo, capacity: [cap], correction: { factor: 0.8, previous: 1, rule: "down", why: "88.0% met (target 95.0%) at 2,400 tokens/s per instance, below the 4,000 planned: halfway toward 0.60" }, lastHour: { ...span, requests: 1200, met: 1056, attainment: 0.88 } },
      { model: "b", slo: { ...slo, ttftMs: 1500, percentile: 0.99 }, capacity: [{ gpu: "g", gpusPerInstance: 2, tokensPerS: 900, predictedTokensPerS: 900, derivation: "given in the fleet (tokensPerS)" }], correction: { factor: 1, previous: 1, rule: "held", why: "0 request(s) since the last plan, fewer than 50: too few to judge" }, lastHour: { ...span, requests: 0, met: 0, attainment: null } },
    ],
  });

  it("shows each model's SLO, attainment against it, and the correction factor with why", () => {
    const html = renderPlanHtml(withSlo);
    const table = html.slice(html.indexOf('<table class="slo">'), html.indexOf("</table>", html.indexOf('<table class="slo">')));
    expect(table).toContain('<td class="l">p95 TTFT ≤ 1000 ms, TPOT ≤ 100 ms</td><td>1,200</td><td>1,056</td><td>88.0%</td><td class="l missed">missed (target 95.0%)</td><td class="factor">×0.80↓</td>');
    expect(table).toContain("from ×1.00: 88.0% met");
    expect(table).toContain('<td class="l">p99 TTFT ≤ 1500 ms, TPOT ≤ 100 ms</td><td class="none" colspan="4">no requests</td><td class="factor">×1.00</td>');
    expect(html).toContain("counts the interactive requests that ended between 2026-11-23 13:00 UTC and 14:00");
  });

  it("shows the capacity per instance: planned = predicted × correction, requests/s, batch, mix and derivation", () => {
    const html = renderPlanHtml(withSlo);
    expect(html).toContain('<td class="l">4 × g</td><td class="planned">3,200</td><td>4,000</td><td>×0.80</td><td>2.93</td><td>74</td><td class="l">1,155 / 211 (default)</td><td class="l derivation">p95 TTFT ≤ 1000 ms');
    expect(html).toContain('<td class="planned">900</td><td>900</td><td>×1.00</td><td>—</td><td>—</td><td class="l">—</td><td class="l derivation">given in the fleet (tokensPerS)</td>');
    for (const k of ["slo", "capacity-at-slo", "correction", "attainment"]) expect(html).toContain(`<dt id="g-${k}">`);
  });

  it("says 'not measured' for a plan without telemetry, and that a report before issue 31 records no SLO", () => {
    const offline = renderPlanHtml(report({ slo: [{ ...withSlo.slo![0]!, lastHour: null }] }));
    expect(offline).toContain(">not measured</td>");
    expect(offline).not.toContain("counts the interactive requests");
    const old = renderPlanHtml(report());
    expect(old).toContain('<p class="muted slo-none">This plan records no SLO');
    expect(old).not.toContain('<table class="slo">');
  });
});

describe("the chart kit's log axis and bars (one kit for the plan pages and the replay reports)", () => {
  it("a log axis puts ticks at powers of 10 and draws log10 of each value", () => {
    const svg = lineChart({ title: "p95", unit: "ms", timeBase: "relative", log: true, series: [{ name: "a", points: [[0, 10], [3_600_000, 1000]] }] });
    // Values 10 and 1,000 → log10 1 and 3; the axis runs 0..3 with ticks 1, 10, 100, 1k.
    for (const t of ["1", "10", "100", "1k"]) expect(svg).toContain(`text-anchor="end">${t}</text>`);
    expect(svg).toContain("ms, log scale");
    expect(svg).toContain("hours since trace start");
  });

  it("identical series are drawn once, named together, stepped or not", () => {
    const pts: [number, number][] = [[0, 1], [3_600_000, 2]];
    for (const stepped of [false, true]) {
      const svg = lineChart({ title: "t", unit: "instances", timeBase: "relative", stepped, holdLastMs: 3_600_000, series: [{ name: "instances", points: pts }, { name: "target", points: pts }, { name: "other", points: [[0, 3]] }] });
      expect(svg).toContain("instances = target");
      expect(svg.match(/class="series"/g)?.length).toBe(2);
    }
  });

  it("bars: one per (series, category) with a finite value, each titled with its figure", () => {
    const svg = barChart({ title: "instance-hours", unit: "instance-hours", categories: ["m1", "m2"], series: [{ name: "hpa", values: [100, 250] }, { name: "lt", values: [90, Number.NaN] }] });
    expect(svg.match(/<rect class="bar"/g)).toHaveLength(3);
    expect(svg).toContain("<title>hpa m2: 250 instance-hours</title>");
    expect(svg).toContain("<title>lt m1: 90 instance-hours</title>");
    expect(svg).not.toContain("lt m2");
  });
});
