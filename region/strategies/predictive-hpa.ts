/**
 * `predictive-hpa` (issue 46): the Kubernetes HPA (hpa.ts) on the utilization the endpoint is forecast to have when
 * an instance started now would serve — the forecast used only for what the reactive path cannot cover.
 *
 * A reactive autoscaler sees a rise only once it has arrived, and its new instance serves one scale-out time later;
 * what it must hold in reserve is the rise over that lead (SageServe §1, Figure 1: "the problem is exacerbated by
 * the delays in spinning up LLM instances"). So at each pass, with the plan's point-forecast path F (the planner's
 * `demandSteps`, 10-minute steps) and the endpoint's expected scale-out time S (the actuator's figure, the one the
 * regions report to the planner):
 *
 *   lead  = leadFactor × S + syncPeriodMs                (the HPA acts at its next sync; the instance serves S later)
 *   rise  = max{ F(t) : t ∈ [now, now + lead] } / F(now)  (≥ 1; 1 without a plan, or with F(now) = 0)
 *   metric = utilization × min(rise, maxRise)
 *
 * and the HPA's own rules (windowed metric, ratio to target, tolerance, stabilization, rate policies) decide on that
 * metric. The rise is relative: the forecast's *shape* over the lead scales the level the endpoint observes now, so a
 * forecast biased high or low in level costs nothing (SageServe §6.5.1 LT-UA's reason for reading observed traffic:
 * "ARIMA predictions are inaccurate ... if bursty requests occur often"); only a forecast rise inside the lead adds
 * instances. With scale-out in seconds (network loading, BlitzScale) the lead covers a sliver of one step, the rise is
 * almost always 1 and this is the tuned HPA; with scale-out in minutes (SageServe §7.1's spot moves and redeploys)
 * the lead spans whole forecast steps and a ramp the forecast sees is pre-scaled by S.
 *
 * Scale-in: an instance given back cannot return before S. With `holdForScaleOut` 1 the HPA's scale-down
 * stabilization window is max(scaleDownStabilizationMs, S): the endpoint scales in only to the most the last S
 * asked for, so a dip shorter than a scale-out does not give back capacity it would wait S to reclaim.
 *
 * The knob an operator tunes is `targetUtilization`, as for `reactive-hpa`; the comparison of the two (and of the
 * planner's floor strategies) across scale-out regimes is bench:strategies (sim/week/README.md).
 */
import { reactiveHpa, type HpaParams, type HpaState } from "./hpa.js";
import type { ForecastPath, Strategy, StrategyDecision, StrategyInput } from "./types.js";

export interface PredictiveHpaParams extends HpaParams {
  leadFactor: number;
  maxRise: number;
  holdForScaleOut: number;
}

/**
 * The forecast's rise over [nowMs, nowMs + leadMs]: the largest step's demand over the current step's (≥ 1). 1 with
 * no path, a current step of zero demand, or a lead of 0 that stays in the current step. Past the path's last step,
 * the last holds (no rise); before its first, the first.
 */
export function forecastRise(path: ForecastPath | undefined, nowMs: number, leadMs: number): number {
  if (path === undefined || path.tokensPerS.length === 0 || !(path.stepMs > 0)) return 1;
  const last = path.tokensPerS.length - 1;
  const stepAt = (t: number) => Math.min(last, Math.max(0, Math.floor((t - path.startMs) / path.stepMs)));
  const from = stepAt(nowMs);
  const to = stepAt(nowMs + Math.max(0, leadMs));
  const base = path.tokensPerS[from]!;
  if (!(base > 0)) return 1;
  let most = base;
  for (let k = from + 1; k <= to; k++) most = Math.max(most, path.tokensPerS[k]!);
  return most / base;
}

export const predictiveHpa: Strategy<PredictiveHpaParams, HpaState> = {
  name: "predictive-hpa",
  summary: "HPA on the utilization forecast one scale-out time ahead: the forecast's rise over the scale-out lead scales the observed utilization",
  usesForecast: true,
  params: {
    ...reactiveHpa.params,
    leadFactor: { help: "the lead over which a forecast rise counts, in expected scale-out times (0 = plain HPA)", default: 1, min: 0, max: 10 },
    maxRise: { help: "the largest factor a forecast rise may scale the utilization by", default: 3, min: 1, max: 100 },
    holdForScaleOut: { help: "1: scale in only to the most of the last scale-out time's recommendations (stabilization ≥ the scale-out time); 0: the HPA's window alone", default: 1, min: 0, max: 1 },
  },
  newState: reactiveHpa.newState!,
  decide(input: StrategyInput, p: PredictiveHpaParams, st: HpaState): StrategyDecision {
    const scaleOutMs = Math.max(0, input.scaleOutMs ?? 0);
    const rise = Math.min(p.maxRise, forecastRise(input.forecastPath, input.nowMs, p.leadFactor * scaleOutMs + p.syncPeriodMs));
    const params = p.holdForScaleOut >= 1 && scaleOutMs > p.scaleDownStabilizationMs ? { ...p, scaleDownStabilizationMs: scaleOutMs } : p;
    const d = reactiveHpa.decide(rise > 1 ? { ...input, utilization: input.utilization * rise } : input, params, st);
    return rise > 1 && d.reason === "hpa-up" ? { desired: d.desired, reason: "forecast-rise" } : d;
  },
};
