/**
 * `reactive-hpa`: the Kubernetes HorizontalPodAutoscaler (autoscaling/v2, default behavior) driving one endpoint on
 * its effective memory utilization — what operators run today, and the second baseline LT-UA is judged against
 * (issue 11; `reactive` stays SageServe §7.2's rule so its figures compare like for like).
 *
 * Sources (behaviour re-stated, no code taken): Kubernetes pkg/controller/podautoscaler/replica_calculator.go
 * (`GetResourceReplicas`: ready and unready pods, tolerance), horizontal.go (`stabilizeRecommendationWithBehaviors`,
 * `convertDesiredReplicasWithBehaviorRate`, `calculateScaleUpLimitWithScalingRules`,
 * `calculateScaleDownLimitWithBehaviors`), and https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
 * ("Algorithm details", "Stabilization window", "Scaling policies", "Default Behavior").
 *
 * Mapping: a pod is an instance; ready pods are `serving`; unready pods are provisioning + loading
 * (`current − serving`); the scale target's replicas are `current`. The metric is one average over the endpoint
 * (tidegate has no per-instance figure), so the calculator's "missing pods" case does not arise.
 *
 * Per call: record the utilization sample — only while an instance is ready: with none the HPA has no pod metric
 * (GetResourceReplicas gets no metrics from ready pods), and a figure taken then (a region reads an endpoint with no
 * serving instance as full) would stay in the window and scale the endpoint up the moment its first instance became
 * ready. Once per `syncPeriodMs` (the first call included) evaluate:
 *   1. metric = time-weighted average of the samples over the last `metricWindowMs` (the HPA reads a windowed
 *      figure from the metrics pipeline, never an instantaneous one);
 *   2. raw = the replica calculator's count (below);
 *   3. stabilize: up = min of raw and the recommendations of the last `scaleUpStabilizationMs`, down = max of raw and
 *      those of the last `scaleDownStabilizationMs`; current raised to up, then lowered to down. raw is recorded;
 *   4. rate-limit: a scale-up to at most max(periodStart + scaleUpPods, ceil(periodStart × (1 + scaleUpPercent/100)))
 *      (selectPolicy Max), a scale-down to at least trunc(periodStart × (1 − scaleDownPercent/100)), where
 *      periodStart = current − replicas added + replicas removed by this strategy's recommendations within the
 *      policy's period; a limit never moves against the direction (it is capped at current);
 *   5. clamp to [minInstances, maxInstances], record the change as a scale event.
 * Between syncs return that answer (reason `hpa-hold`) so the controller keeps stepping toward it, as a Deployment
 * keeps converging on spec.replicas between two HPA syncs.
 *
 * Replica calculator, ratio = metric / targetUtilization: with ready = 0 keep current (the HPA gets no metrics). With
 * no unready instance, or ratio ≤ 1: |1 − ratio| ≤ tolerance keeps current, else ceil(ratio × ready). Scaling up with
 * unready instances counts them at 0 utilization: newRatio = ratio × ready / current; within tolerance, or on the
 * other side of 1 from ratio, keep current; else ceil(newRatio × current) unless that moves against newRatio.
 *
 * Reasons: `hpa-up`, `hpa-down`, `hpa-tolerance` (within tolerance), `hpa-unready` (unready instances cancel the
 * scale-up), `hpa-no-ready`, `hpa-steady` (the count already fits), `hpa-stabilized` (the window changed the count),
 * `hpa-rate-limited`, `bounds`, `hpa-hold` (between syncs).
 *
 * State (`HpaState`, one per endpoint, kept by the caller) is soft: lost on a restart, as the controller-manager loses
 * its recommendation history and scale events.
 */
import { clampCount, type Strategy, type StrategyDecision, type StrategyInput } from "./types.js";

/** Parameters (utilization as a fraction, times in ms, Percent and Pods policy values as in an HPA's `behavior`). */
export interface HpaParams extends Record<string, number> {
  targetUtilization: number;
  tolerance: number;
  metricWindowMs: number;
  syncPeriodMs: number;
  scaleUpStabilizationMs: number;
  scaleDownStabilizationMs: number;
  scaleUpPercent: number;
  scaleUpPods: number;
  scaleUpPeriodMs: number;
  scaleDownPercent: number;
  scaleDownPeriodMs: number;
}

/** One endpoint's HPA memory. Times are clock ms; lists are oldest first. */
export interface HpaState {
  /** Utilization samples; the newest one at or before the metric window's start is kept (its value holds there). */
  samples: { atMs: number; value: number }[];
  /** Time of the last evaluation; undefined before the first. */
  lastSyncMs: number | undefined;
  /** The last evaluation's answer, returned until the next one. */
  held: StrategyDecision | undefined;
  /** Unstabilized recommendations of past evaluations (the stabilization windows read them). */
  recommendations: { atMs: number; replicas: number }[];
  /** Instances added / removed by past recommendations (the rate policies read them). */
  scaleUpEvents: { atMs: number; replicas: number }[];
  scaleDownEvents: { atMs: number; replicas: number }[];
}

const HOUR = 3_600_000;

/** Math.ceil that ignores floating-point noise: 10 × 1.1 is 11, not 12. */
const ceil = (x: number): number => Math.ceil(x - 1e-9);

export const reactiveHpa: Strategy<HpaParams, HpaState> = {
  name: "reactive-hpa",
  summary: "Kubernetes HPA on windowed memory utilization: ratio to target, tolerance, stabilization windows, rate policies",
  usesForecast: false,
  params: {
    targetUtilization: { help: "target average effective memory utilization (the HPA's averageUtilization)", default: 0.7, min: 0.01, max: 2 },
    tolerance: { help: "no change while |1 − utilization/target| is at most this", default: 0.1, min: 0, max: 1 },
    metricWindowMs: { help: "utilization is averaged (time-weighted) over this window; 0 = the latest sample", default: 60_000, min: 0, max: HOUR },
    syncPeriodMs: { help: "one evaluation per period (--horizontal-pod-autoscaler-sync-period); the answer is held between", default: 15_000, min: 0, max: HOUR },
    scaleUpStabilizationMs: { help: "scale up only to the lowest recommendation of this window", default: 0, min: 0, max: HOUR },
    scaleDownStabilizationMs: { help: "scale down only to the highest recommendation of this window", default: 300_000, min: 0, max: HOUR },
    scaleUpPercent: { help: "Percent policy: add at most this % of the period's starting count per period (0 = off)", default: 100, min: 0, max: 10_000 },
    scaleUpPods: { help: "Pods policy: add at most this many instances per period (0 = off); the larger of the two applies", default: 4, min: 0, max: 10_000 },
    scaleUpPeriodMs: { help: "period of both scale-up policies", default: 15_000, min: 1000, max: 1_800_000 },
    scaleDownPercent: { help: "Percent policy: remove at most this % of the period's starting count per period", default: 100, min: 0, max: 100 },
    scaleDownPeriodMs: { help: "period of the scale-down policy", default: 15_000, min: 1000, max: 1_800_000 },
  },
  newState: (): HpaState => ({ samples: [], lastSyncMs: undefined, held: undefined, recommendations: [], scaleUpEvents: [], scaleDownEvents: [] }),
  decide(input: StrategyInput, p: HpaParams, st: HpaState): StrategyDecision {
    const now = input.nowMs;
    if (input.serving > 0) recordSample(st, now, input.utilization, p.metricWindowMs);
    if (st.held !== undefined && st.lastSyncMs !== undefined && now - st.lastSyncMs < p.syncPeriodMs) {
      return { desired: clampCount(st.held.desired, input), reason: "hpa-hold" };
    }
    st.lastSyncMs = now;
    const decision = evaluate(input, p, st);
    const current = input.current;
    const eventsKeepMs = Math.max(p.scaleUpPeriodMs, p.scaleDownPeriodMs);
    st.scaleUpEvents = st.scaleUpEvents.filter((e) => e.atMs > now - eventsKeepMs);
    st.scaleDownEvents = st.scaleDownEvents.filter((e) => e.atMs > now - eventsKeepMs);
    if (decision.desired > current) st.scaleUpEvents.push({ atMs: now, replicas: decision.desired - current });
    if (decision.desired < current) st.scaleDownEvents.push({ atMs: now, replicas: current - decision.desired });
    st.held = decision;
    return decision;
  },
};

/** One HPA evaluation (steps 1–5 of the header); records the raw recommendation. */
function evaluate(input: StrategyInput, p: HpaParams, st: HpaState): StrategyDecision {
  const current = input.current;
  const now = input.nowMs;
  // Out of bounds: the HPA moves to the bound without reading metrics.
  const inBounds = clampCount(current, input);
  if (inBounds !== current) return { desired: inBounds, reason: "bounds" };
  // No sample yet means no ready instance ever: the calculator holds without reading the metric.
  const calc = calculateReplicas(st.samples.length > 0 ? windowAverage(st.samples, now, p.metricWindowMs) : 0, input, p);
  const stabilized = stabilize(st, now, current, calc.replicas, p);
  const limited = rateLimit(st, now, current, stabilized, p);
  const desired = clampCount(limited, input);
  let reason: string;
  if (desired !== limited) reason = "bounds";
  else if (limited !== stabilized) reason = "hpa-rate-limited";
  else if (stabilized !== calc.replicas) reason = "hpa-stabilized";
  else if (desired > current) reason = "hpa-up";
  else if (desired < current) reason = "hpa-down";
  else reason = calc.hold ?? "hpa-steady";
  return { desired, reason };
}

/** Appends a sample (a second one at the same time replaces the first) and drops those the window no longer needs. */
function recordSample(st: HpaState, now: number, value: number, windowMs: number): void {
  const last = st.samples.at(-1);
  if (last !== undefined && last.atMs === now) last.value = value;
  else st.samples.push({ atMs: now, value });
  const start = now - windowMs;
  let drop = 0;
  while (drop + 1 < st.samples.length && st.samples[drop + 1]!.atMs <= start) drop++;
  if (drop > 0) st.samples.splice(0, drop);
}

/**
 * Time-weighted mean over [now − windowMs, now] of the step function the samples make (each value holds until the
 * next sample); the window starts at the first sample when history is shorter. No span (one sample, or a zero
 * window): the latest value.
 */
function windowAverage(samples: readonly { atMs: number; value: number }[], now: number, windowMs: number): number {
  const start = Math.max(now - windowMs, samples[0]!.atMs);
  let area = 0;
  for (let i = 0; i < samples.length; i++) {
    const from = Math.max(samples[i]!.atMs, start);
    const to = i + 1 < samples.length ? samples[i + 1]!.atMs : now;
    if (to > from) area += samples[i]!.value * (to - from);
  }
  return now > start ? area / (now - start) : samples.at(-1)!.value;
}

/** The replica calculator (replica_calculator.go GetResourceReplicas, one resource metric, no missing pods). */
function calculateReplicas(utilization: number, input: StrategyInput, p: HpaParams): { replicas: number; hold?: string } {
  const current = input.current;
  const ready = input.serving;
  if (ready <= 0) return { replicas: current, hold: "hpa-no-ready" };
  const ratio = utilization / p.targetUtilization;
  const unready = current - ready;
  if (unready <= 0 || ratio <= 1) {
    if (Math.abs(1 - ratio) <= p.tolerance) return { replicas: current, hold: "hpa-tolerance" };
    return { replicas: ceil(ratio * ready) };
  }
  // Scale-up with unready instances: they count at 0 utilization, which can only damp the scale-up.
  const newRatio = (ratio * ready) / current;
  if (Math.abs(1 - newRatio) <= p.tolerance) return { replicas: current, hold: "hpa-tolerance" };
  if (newRatio < 1) return { replicas: current, hold: "hpa-unready" };
  const replicas = ceil(newRatio * current);
  return replicas < current ? { replicas: current, hold: "hpa-unready" } : { replicas };
}

/** Stabilization windows (horizontal.go stabilizeRecommendationWithBehaviors); records `raw`. */
function stabilize(st: HpaState, now: number, current: number, raw: number, p: HpaParams): number {
  let up = raw;
  let down = raw;
  for (const r of st.recommendations) {
    if (r.atMs > now - p.scaleUpStabilizationMs) up = Math.min(up, r.replicas);
    if (r.atMs > now - p.scaleDownStabilizationMs) down = Math.max(down, r.replicas);
  }
  const keepMs = Math.max(p.scaleUpStabilizationMs, p.scaleDownStabilizationMs);
  st.recommendations = st.recommendations.filter((r) => r.atMs > now - keepMs);
  st.recommendations.push({ atMs: now, replicas: raw });
  return Math.min(Math.max(current, up), down);
}

/** Instances added (up) or removed (down) by recommendations within the last `periodMs`. */
function changeWithin(events: readonly { atMs: number; replicas: number }[], now: number, periodMs: number): number {
  let n = 0;
  for (const e of events) if (e.atMs > now - periodMs) n += e.replicas;
  return n;
}

/** Rate policies (horizontal.go convertDesiredReplicasWithBehaviorRate; selectPolicy Max in both directions). */
function rateLimit(st: HpaState, now: number, current: number, desired: number, p: HpaParams): number {
  if (desired > current) {
    const start = current - changeWithin(st.scaleUpEvents, now, p.scaleUpPeriodMs) + changeWithin(st.scaleDownEvents, now, p.scaleUpPeriodMs);
    const limit = Math.max(start + p.scaleUpPods, ceil(start * (1 + p.scaleUpPercent / 100)));
    return Math.min(desired, Math.max(limit, current));
  }
  if (desired < current) {
    const start = current - changeWithin(st.scaleUpEvents, now, p.scaleDownPeriodMs) + changeWithin(st.scaleDownEvents, now, p.scaleDownPeriodMs);
    const limit = Math.trunc(start * (1 - p.scaleDownPercent / 100));
    return Math.max(desired, Math.min(limit, current));
  }
  return desired;
}
