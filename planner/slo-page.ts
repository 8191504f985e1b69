/**
 * The plan page's SLO section (issue 31): per model its SLO (TTFT and TPOT targets at a percentile), how its
 * requests met it since the previous plan (requests, met, attainment against the target; "no requests" when none
 * ended, "not measured" when the plan saw no telemetry) and the correction factor with why (`table.slo`); then the
 * capacity per instance at the SLO for each GPU type — planned tokens/s = predicted × correction, requests/s, batch,
 * request mix and one line on how it was derived (`table.capacity`). Reports from before issue 31 have no `slo`: the
 * section says so. Pure string builders, like html.ts.
 */
import { esc, fmtTime, type TimeBase } from "./charts.js";
import type { ModelSloReport, PlanReport, SloAttainment } from "./report.js";

type Term = (key: string, shown?: string) => string;

const int = (n: number): string => Math.round(n).toLocaleString("en-US");
const pc = (x: number): string => `${(100 * x).toFixed(1)}%`;
const pctl = (p: number): string => `p${+(100 * p).toFixed(1)}`;

/** "p95 TTFT ≤ 1000 ms, TPOT ≤ 100 ms". */
export function sloText(s: ModelSloReport["slo"]): string {
  return `${pctl(s.percentile)} TTFT ≤ ${s.ttftMs} ms, TPOT ≤ ${s.tpotMs} ms`;
}

/** The attainment cells (requests, met, attainment, against the target). */
function attainmentCells(h: SloAttainment | null, percentile: number): string {
  if (h === null) return `<td class="none" colspan="4" title="this plan received no SLO telemetry from the regions (e.g. an offline plan)">not measured</td>`;
  if (h.requests === 0 || h.attainment === null) return `<td class="none" colspan="4">no requests</td>`;
  const ok = h.attainment >= percentile;
  return `<td>${int(h.requests)}</td><td>${int(h.met)}</td><td>${pc(h.attainment)}</td><td class="l ${ok ? "met" : "missed"}">${ok ? "met" : "missed"} (target ${pc(percentile)})</td>`;
}

/** The SLO section of the plan page, or a line saying the report has none. */
export function sloSection(r: PlanReport, base: TimeBase, t: Term): string {
  const rows = r.slo;
  if (rows === undefined || rows.length === 0) return `<h2>${t("slo")} and ${t("capacity-at-slo")}</h2><p class="muted slo-none">This plan records no SLO (made before SLOs were planned for, or from a fleet without one): its capacities per instance are the fleet's.</p>`;
  const span = rows.find((x) => x.lastHour !== null)?.lastHour;
  const since = span === undefined || span === null ? "" : ` The ${t("attainment")} counts the interactive requests that ended between ${esc(fmtTime(span.fromMs, base))} and ${esc(fmtTime(span.toMs, base, false))}, as the regions reported them.`;
  const models = rows.map((s) => {
    const c = s.correction;
    const arrow = c.rule === "down" ? "↓" : c.rule === "up" ? "↑" : "";
    return `<tr><td class="l">${esc(s.model)}</td><td class="l">${esc(sloText(s.slo))}</td>${attainmentCells(s.lastHour, s.slo.percentile)}<td class="factor">×${c.factor.toFixed(2)}${arrow}</td><td class="l">${esc(c.factor === c.previous ? c.why : `from ×${c.previous.toFixed(2)}: ${c.why}`)}</td></tr>`;
  });
  const capacity = rows.flatMap((s) =>
    s.capacity.map((c) => {
      const mix = c.mix === undefined ? "—" : `${int(c.mix.promptTokens)} / ${int(c.mix.outputTokens)} (${c.mix.source === "telemetry" ? "reported" : "default"})`;
      return `<tr><td class="l">${esc(s.model)}</td><td class="l">${c.gpusPerInstance} × ${esc(c.gpu)}</td><td class="planned">${int(c.tokensPerS)}</td><td>${int(c.predictedTokensPerS)}</td><td>×${s.correction.factor.toFixed(2)}</td><td>${c.requestsPerS === undefined ? "—" : c.requestsPerS.toFixed(2)}</td><td>${c.batch ?? "—"}</td><td class="l">${esc(mix)}</td><td class="l derivation">${esc(c.derivation)}</td></tr>`;
    }),
  );
  return `<h2>${t("slo")} and ${t("capacity-at-slo")}</h2>
<p class="muted">Each model's interactive ${t("slo")}, how its requests met it since the previous plan, and the ${t("correction")} this plan applied to its capacity.${since}</p>
<table class="slo"><tr><th class="l">model</th><th class="l">SLO</th><th>requests</th><th>met</th><th>${t("attainment")}</th><th class="l">vs target</th><th>${t("correction")}</th><th class="l">why</th></tr>
${models.join("\n")}</table>
<p class="muted">The ${t("capacity-at-slo")} the ILP covered demand with: the predicted ${t("tokens-per-s")} one instance sustains at the SLO × the correction factor; requests/s and batch are the prediction's.</p>
<table class="capacity"><tr><th class="l">model</th><th class="l">instance</th><th>planned tokens/s</th><th>predicted tokens/s</th><th>correction</th><th>requests/s</th><th>batch</th><th class="l">request mix (prompt / output tokens)</th><th class="l">how derived</th></tr>
${capacity.join("\n")}</table>`;
}
