/**
 * What the plan pages' terms mean: every symbol, abbreviation and name of a method or strategy on the plan page and
 * the index is shown through `term` (a link to its glossary entry, with the meaning as a tooltip) and the page ends
 * with `glossarySection` listing the terms it used. Definitions state what the planner computes (plan.ts, ilp.ts,
 * spot.ts, region/strategies/README.md), not the papers' wording. Pure string builders; no scripts (the pages' CSP
 * has none): tooltips are `title` attributes.
 */
import { esc } from "./charts.js";

/** One glossary entry: how it is shown and what it means. */
export interface GlossaryEntry {
  label: string;
  text: string;
}

/** Every term the plan pages use, by key (the key is also the entry's anchor, `#g-<key>`). */
export const GLOSSARY: Record<string, GlossaryEntry> = {
  alpha: { label: "α (alpha)", text: "The share of each region's own forecast F that the plan must cover with instances in that region (planner.alpha). The rest of a model's demand may be served from any region: the plan also covers the sum of F over all regions." },
  beta: { label: "β (beta)", text: "The NIW buffer factor (planner.beta): F adds β × last hour's mean batch (NIW) tokens/s." },
  iw: { label: "IW", text: "Interactive work: streaming requests answered as they arrive. History, forecasts and the actual load are IW tokens/s (batch tokens are not counted twice)." },
  "niw-buffer": { label: "NIW buffer", text: "NIW is non-interactive work: batch jobs (the OpenAI Batch API) that wait in the queue and are dispatched to spare capacity. The NIW buffer, β × last hour's mean NIW tokens/s, is added to F so that capacity is planned for them too." },
  "tokens-per-s": { label: "tokens/s", text: "Tokens per second (prompt + output): the unit of demand, and of what one instance serves while its model's SLO holds (the capacity at the SLO)." },
  peak: { label: "peak", text: "The point forecast of the next hour's highest 10-minute mean IW load, tokens/s." },
  band: { label: "10% / 90%", text: "The forecast's 10% and 90% quantiles: the peak is expected above the 10% bound and below the 90% bound 8 times in 10. The shaded band on the charts." },
  f: { label: "F: planned for", text: "F(m, r), the tokens/s the plan covers for a model in a region: the forecast peak's 90% bound (planner.provisionFor \"upper\", the default; \"mean\": the point forecast) plus the NIW buffer." },
  "last-hour": { label: "last hour's forecast error", text: "For the hour an earlier plan covered, once that hour has ended: its peak forecast against the highest 10-minute mean actually recorded in it, (forecast − actual) / actual in % (+ = forecast too high). \"not yet\" while that hour is still running; the index shows the mean of |error| over the series." },
  method: { label: "method", text: "The forecaster that made the series' forecast; a guard replaces a forecast that is not finite, is negative or exceeds 3× the history's maximum with the seasonal-naive one and records why (the note column)." },
  "method-blend": { label: "blend", text: "The default forecaster: a weighted mix of persistence (last hour's peak), the seasonal ratio (today's level × the same hour's peak-to-level ratio on the previous days), seasonal-naive (the same hour yesterday) and two local-level Kalman filters, weights fitted on the series' own last 96 hourly forecasts, with outage windows left out; its upper band is the 90% quantile of its past misses (forecasts/README.md)." },
  "method-blend-arima": { label: "blend-arima", text: "The default forecaster: the blend (five predictors weighted on the series' own last 96 hourly forecasts) mixed with an ARIMA component — SARIMA(1,0,1)(0,1,0)24 on the log hourly peaks of the last 3 days (SageServe forecasts with ARIMA) — whose weight λ ∈ {0, ¼, ½, ¾, 1} minimises the mix's MAPE over the last 24 hourly forecasts. An ARIMA forecast that fails, is not finite or is more than 3× off the blend's is kept out: λ = 0 at that hour, and when more than half of the 24 were kept out (forecasts/README.md)." },
  components: { label: "components: weight · recent error", text: "The parts of a combined forecast: each one's weight in the point forecast (the weights sum to 1) and its own peak forecast error, mean |forecast − actual| / actual, over the recent hourly forecasts the weights were fitted on (the blend's predictors over up to 96, ARIMA over up to 24 of them; — where none). persistence: last hour's peak; seasonalRatio: today's level × the same hour's peak-to-level ratio on the previous days; seasonalNaive: the same hour yesterday; kalmanWindow, kalmanPeak: local-level Kalman filters on the 10-minute windows and on the hourly peaks; arima: the ARIMA component." },
  "method-persistence": { label: "persistence", text: "Forecasts the next hour's peak as last hour's peak." },
  "method-seasonal-naive": { label: "seasonal-naive", text: "Forecasts the next hour as the same hour one day earlier; also the fallback of every forecaster." },
  "method-arima": { label: "ARIMA / SARIMA", text: "A (seasonal) ARIMA model fitted to log(load), e.g. sarima(1,0,1)(1,1,1)24: autoregressive, differencing and moving-average orders, then the seasonal ones and the season length." },
  "method-last-hour-peak": { label: "last-hour-peak", text: "Used when the forecaster failed: the plan assumes the next hour peaks at last hour's peak (the warning says why)." },
  strategy: { label: "strategy", text: "How each region's controller paces its instances toward the plan's targets (controller.strategy)." },
  "strategy-lt-ua": { label: "lt-ua", text: "Long-term, utilization- and arrival-aware (SageServe): moves toward the plan's target only while smoothed utilization asks for it (out above 70%, in below 30%, in as far as the floor the point forecast needs), and in the last 20 minutes of the hour goes past the target while observed load is ≥ 5× the point forecast, below it while ≤ 0.2×." },
  "strategy-lt-u": { label: "lt-u", text: "Long-term, utilization-aware: moves toward the plan's target only while smoothed utilization is above 70% (out) or below 30% (in)." },
  "strategy-lt-i": { label: "lt-i", text: "Long-term, immediate: jumps to the plan's target at once." },
  "strategy-reactive": { label: "reactive", text: "No plan: one instance more above 70% memory utilization, one fewer below 30%, one step per cooldown." },
  "strategy-reactive-hpa": { label: "reactive-hpa", text: "No plan: the Kubernetes Horizontal Pod Autoscaler's rule on memory utilization." },
  "strategy-demand": { label: "demand", text: "No plan: scales at once to the instances the observed tokens/s needs (BlitzScale §5.3)." },
  "strategy-keystage": { label: "keystage", text: "Holds the plan's target (as lt-i) and splits pipelined instances' GPUs over their stages." },
  advisory: { label: "advisory", text: "Advisory mode (planner.advisory): plans are published but their targets reach the regions only when an admin approves the newest plan." },
  decision: { label: "decision", text: "The decision id: increasing with every plan, sent with its targets; a region refuses targets older than the newest it has, so a stale planner cannot undo a newer plan." },
  holding: { label: "holding", text: "GPU-hour price × GPUs of every planned instance, for the hour." },
  "vm-starts": { label: "VM starts", text: "The price of starting a new VM, per GPU, for each instance that needs one." },
  "model-starts": { label: "model starts", text: "The price of loading a model onto GPUs: for new instances and for spot GPUs taken from another model." },
  spot: { label: "spot", text: "GPUs not in the plan are lent to spot (preemptible) work; a scale-out takes its GPUs back from spot first, which avoids a VM start." },
  "own-spot": { label: "from own spot", text: "Instances of this model that were lent to spot and are taken back: no VM or model start." },
  "other-spot": { label: "from other spot", text: "GPUs another model lent to spot, taken and loaded with this model: a model start, no VM start." },
  "new-vms": { label: "new VMs", text: "Instances that need a new VM: a VM start and a model start." },
  "to-spot": { label: "to spot", text: "Instances of this endpoint lent to spot on a scale-in, as this model's spot: taking them back later needs no start." },
  "scale-out": { label: "expected scale-out", text: "The time for one more instance to serve, decision to serving, as its region reports it: the last scale-out it measured, else the data plane's ideal time to move the model over one link." },
  unmet: { label: "unmet", text: "Tokens/s of the demand planned for (F) that no allowed count of instances can cover (capacity or maxInstances); the solver pays a penalty for each, so demand that can be met always is." },
  objective: { label: "objective", text: "What the solver minimised: holding + every added instance priced as a VM start and a model start + the penalty for unmet demand." },
  "solver-path": { label: "path", text: "mip: the integer program solved exactly by HiGHS; decomposition: large fleets (or a MIP without a proof of optimality), solved by Lagrangian decomposition with the gap to its best lower bound reported." },
  "lower-bound": { label: "lower bound", text: "No plan can have a lower objective than this (the solver's bound)." },
  gap: { label: "gap", text: "How far the objective may be above the best possible, relative to it: 0% is a proved optimum." },
  "on-request": { label: "on request", text: "Made by \"Plan now\", off the hourly schedule." },
  slo: { label: "SLO", text: "The interactive service-level objective a model is held to (config slo): at least the percentile (e.g. p95) of its requests get their first token within the TTFT target and their later tokens within the TPOT target (time per output token, the mean time between tokens). A request refused or failed before its first token misses it." },
  "capacity-at-slo": { label: "capacity per instance", text: "tps(m, g): the most tokens/s (and requests/s) one instance sustains while the SLO holds at its percentile, for the request mix shown — the batch the TPOT target allows (capped by max batch and KV memory), each slot serving a request per lifetime, and an M/M/c queue for a slot whose wait must leave the prefill within the TTFT target (Erlang C). The ILP covers F with it; the planned figure is it × the correction factor." },
  correction: { label: "correction factor", text: "Moves the capacity per instance toward what the regions observed: when a model missed its SLO at a load per instance below the planned capacity, the factor moves halfway down toward observed / predicted; when it met the SLO above the planned capacity, halfway up; otherwise (or with fewer than 50 requests) it stays. Bounded to [0.5, 1.5], carried from plan to plan, and logged when it changes by more than 5%." },
  attainment: { label: "attainment", text: "The share of the model's interactive requests that ended since the previous plan and met both SLO targets, as the regions reported them; compared with the SLO's percentile." },
};

/** The glossary key for a forecast method name as reports carry it (e.g. "sarima(1,0,1)(1,1,1)24log" → method-arima). */
export function methodKey(method: string): string {
  if (/^s?arima/.test(method)) return "method-arima";
  return GLOSSARY[`method-${method}`] === undefined ? "method" : `method-${method}`;
}

/** The glossary key for a region strategy name. */
export function strategyKey(strategy: string): string {
  return GLOSSARY[`strategy-${strategy}`] === undefined ? "strategy" : `strategy-${strategy}`;
}

/**
 * A term on a page: `shown` (default: the entry's label), linked to its glossary entry with its meaning as a tooltip.
 * `used` collects the keys for `glossarySection`. Throws on an unknown key (a page must not use an undefined term).
 */
export function term(key: string, used: Set<string>, shown?: string): string {
  const e = GLOSSARY[key];
  if (e === undefined) throw new RangeError(`no glossary entry ${JSON.stringify(key)}`);
  used.add(key);
  return `<a class="term" href="#g-${key}" title="${esc(e.text)}">${esc(shown ?? e.label)}</a>`;
}

/** The glossary of the terms in `used`, in GLOSSARY's order. */
export function glossarySection(used: ReadonlySet<string>): string {
  const keys = Object.keys(GLOSSARY).filter((k) => used.has(k));
  if (keys.length === 0) return "";
  return `<section class="glossary" id="glossary"><h2>Glossary</h2><dl>${keys.map((k) => `<dt id="g-${k}">${esc(GLOSSARY[k]!.label)}</dt><dd>${esc(GLOSSARY[k]!.text)}</dd>`).join("")}</dl></section>`;
}
