/**
 * `predictive-hpa` (issue 46): the Kubernetes HPA (hpa.ts) above a forecast floor that holds only what a reactive
 * scale-out could not bring in time — the forecast used where it pays.
 *
 * The floor is the forecast's demand over the next scale-out time, in the HPA's own units:
 *
 *   floor = ⌈ k × max{ F_q(t) : t ∈ [now, now + S + syncPeriodMs] } ⌉
 *
 * - S is the endpoint's expected scale-out time (the actuator's figure, the one the regions report to the planner).
 * - F_q(t) is the q-quantile of the plan's forecast band for the step holding t (`forecastBand`: the 10% lower bound,
 *   the point forecast and the 90% upper bound, read as a normal on each side of the point).
 * - q = S / (S + T) (T = `floorHorizonMs`, the planner's 10-minute step) is a newsvendor critical ratio: an instance
 *   held above demand costs its time (c_o ∝ T, the step it is held for), an instance missing when demand comes costs
 *   the SLO for as long as a scale-out takes to land (c_u ∝ S). With scale-out in seconds (network loading, BlitzScale)
 *   q is a few per cent: the floor sits below the forecast's lower bound, almost never binds, and this is the tuned
 *   HPA. With SageServe's provisioning delays (a 10-minute redeploy, §7.1) q is about one half: the point forecast
 *   over the next scale-out is held, and SageServe §1's "instance being available at T=20 minutes ... SLA violations
 *   due to under allocation" is avoided for the demand the forecast sees.
 * - k is instances per forecast token/s at the HPA's target: the HPA's own need (serving × utilization / target, what
 *   its replica calculator computes before any floor) over the forecast's point for the current step, both averaged
 *   over `calibrationMs` (time-weighted). So the floor speaks the HPA's units whatever the planner's capacity model
 *   says, and a forecast biased in level is corrected by what the endpoint actually needs (the correction factor of
 *   NVIDIA Dynamo's planner; SageServe §6.5.1 LT-UA reads observed traffic for the same reason). Until half a
 *   calibration window has been seen there is no floor.
 *
 * Demand above the floor is the HPA's (proportional scale-out). Scale-in: an instance given back cannot return before
 * S, so with `holdForScaleOut` 1 the scale-down stabilization window is max(scaleDownStabilizationMs, S) (the
 * ski-rental rule: hold an idle instance about as long as re-acquiring it takes).
 *
 * The knob an operator tunes is `targetUtilization`, as for `reactive-hpa`; bench:strategies compares the two (and
 * the other strategies) at the SLO across scale-out regimes (sim/week/README.md). Before the first plan it is the HPA.
 */
import { reactiveHpa, type HpaParams, type HpaState } from "./hpa.js";
import type { Strategy, StrategyDecision, StrategyInput } from "./types.js";

export interface PredictiveHpaParams extends HpaParams {
  floorHorizonMs: number;
  calibrationMs: number;
  holdForScaleOut: number;
}

/** The HPA's memory and the floor's calibration: time-weighted averages of the HPA's need and the forecast's point. */
export interface PredictiveState extends HpaState {
  need: number;
  forecast: number;
  /** When the averages were last updated (undefined before), and how long they have been averaging. */
  calibratedAtMs: number | undefined;
  calibratedForMs: number;
}

/** z of the forecast band's 90% upper (and 10% lower) bound. */
const Z90 = 1.2815515655446004;

/**
 * The standard normal quantile Φ⁻¹(p) for 0 < p < 1 (Acklam's rational approximation, relative error < 1.2e-9);
 * ±Infinity at 0 and 1.
 */
export function normalQuantile(p: number): number {
  if (p <= 0) return Number.NEGATIVE_INFINITY;
  if (p >= 1) return Number.POSITIVE_INFINITY;
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number) => (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1);
}

/**
 * The floor's quantile for a scale-out time and a horizon (both ms): S / (S + T), in [0, 1); 0 when S is 0 or
 * unknown.
 */
export function floorQuantile(scaleOutMs: number | undefined, horizonMs: number): number {
  const s = Math.max(0, scaleOutMs ?? 0);
  return s > 0 ? s / (s + horizonMs) : 0;
}

/**
 * The instances at quantile `q` of a forecast band given as instance counts (lower ≤ point ≤ upper, the 10%, 50% and
 * 90% points), read as a normal on each side of the point: point + z/z₉₀ × (upper − point) above, point + z/z₉₀ ×
 * (point − lower) below; never below 0. q = 0 is 0 (no floor).
 */
export function bandQuantile(q: number, lower: number, point: number, upper: number): number {
  if (!(q > 0)) return 0;
  const z = normalQuantile(Math.min(q, 1 - 1e-12));
  return Math.max(0, z >= 0 ? point + (z / Z90) * (upper - point) : point + (z / Z90) * (point - lower));
}

/** The forecast band's step holding `t` (clamped to the band), or undefined without a band. */
function stepAt(band: NonNullable<StrategyInput["forecastBand"]>, t: number): number {
  return Math.min(band.steps.length - 1, Math.max(0, Math.floor((t - band.startMs) / band.stepMs)));
}

/** The largest q-quantile of the band's steps over [fromMs, toMs]. */
export function bandAhead(band: NonNullable<StrategyInput["forecastBand"]>, q: number, fromMs: number, toMs: number): number {
  let most = 0;
  for (let k = stepAt(band, fromMs); k <= stepAt(band, toMs); k++) {
    const b = band.steps[k]!;
    most = Math.max(most, bandQuantile(q, b.lower, b.mean, b.upper));
  }
  return most;
}

export const predictiveHpa: Strategy<PredictiveHpaParams, PredictiveState> = {
  name: "predictive-hpa",
  summary: "HPA above a forecast floor placed in the forecast's band by the scale-out time: the tuned HPA where scale-out is fast, the forecast held ahead where it is slow",
  usesForecast: true,
  params: {
    ...reactiveHpa.params,
    floorHorizonMs: { help: "T in the floor's quantile S / (S + T): how long a floor instance is held (the forecast step)", default: 600_000, min: 1000, max: 86_400_000 },
    calibrationMs: { help: "time constant of the averages that put the forecast in the HPA's units (instances per forecast token/s)", default: 1_800_000, min: 60_000, max: 86_400_000 },
    holdForScaleOut: { help: "1: scale in only to the most of the last scale-out time's recommendations (stabilization ≥ the scale-out time); 0: the HPA's window alone", default: 1, min: 0, max: 1 },
  },
  newState: (): PredictiveState => ({ ...reactiveHpa.newState!(), need: 0, forecast: 0, calibratedAtMs: undefined, calibratedForMs: 0 }),
  decide(input: StrategyInput, p: PredictiveHpaParams, st: PredictiveState): StrategyDecision {
    const scaleOutMs = Math.max(0, input.scaleOutMs ?? 0);
    const params = p.holdForScaleOut >= 1 && scaleOutMs > p.scaleDownStabilizationMs ? { ...p, scaleDownStabilizationMs: scaleOutMs } : p;
    const band = input.forecastBand;
    if (band === undefined || band.steps.length === 0 || input.target === undefined) return reactiveHpa.decide(input, params, st);
    calibrate(st, input, p, band.steps[stepAt(band, input.nowMs)]!.mean);
    if (st.calibratedForMs < p.calibrationMs / 2 || !(st.forecast > 0)) return reactiveHpa.decide(input, params, st);
    const k = st.need / st.forecast;
    const ahead = bandAhead(band, floorQuantile(scaleOutMs, p.floorHorizonMs), input.nowMs, input.nowMs + scaleOutMs + p.syncPeriodMs);
    const floor = Math.min(input.maxInstances, Math.ceil(k * ahead - 1e-9));
    if (floor <= input.minInstances) return reactiveHpa.decide(input, params, st);
    const d = reactiveHpa.decide({ ...input, minInstances: floor }, params, st);
    return d.desired === floor && d.desired > input.current ? { desired: d.desired, reason: "forecast-floor" } : d;
  },
};

/**
 * Folds this pass into the calibration: time-weighted moving averages (time constant `calibrationMs`) of the HPA's need
 * (serving × utilization / target) and of the forecast's point for the current step. A pass with no serving instance
 * or no forecast adds nothing.
 */
function calibrate(st: PredictiveState, input: StrategyInput, p: PredictiveHpaParams, pointNow: number): void {
  if (input.serving <= 0 || !(pointNow > 0) || !Number.isFinite(input.utilization)) return;
  const need = (input.serving * input.utilization) / p.targetUtilization;
  if (st.calibratedAtMs === undefined) {
    st.need = need;
    st.forecast = pointNow;
    st.calibratedAtMs = input.nowMs;
    return;
  }
  const dt = Math.max(0, input.nowMs - st.calibratedAtMs);
  const a = 1 - Math.exp(-dt / p.calibrationMs);
  st.need += (need - st.need) * a;
  st.forecast += (pointNow - st.forecast) * a;
  st.calibratedAtMs = input.nowMs;
  st.calibratedForMs += dt;
}
