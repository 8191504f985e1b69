/**
 * bench:keystage's verdict (test/bench/keystage.ts): key-stage (QUART) against the disk-loading whole-pipeline
 * baseline of QUART §8 per stream (`wholePipeline` is that baseline; the bench's equal-start ablation has no target). Both
 * arms' figures are over every request (region/keystage/run.ts: an unfinished request is +Infinity latency and an
 * SLO miss), and key-stage passes a check only if it finished every request in every round.
 */
import { atLeast, atMost, ratio, type Check } from "./common.js";

/** Targets (issues 13 and 35): at CV ≥ 4 goodput ≥ 2× the baseline's; at CV ≥ 2 mean latency ≥ 35% lower; at CV 0.1 not worse. */
export const KEYSTAGE_TARGET = { goodputRatioAtCvGe4: 2, meanLatencyReductionAtCvGe2: 0.35, notWorseAtCv01: true, unfinishedRequests: 0 };

/** One arm's medians over rounds; `completed`: the fewest finished in any round. */
export interface KeystageArm {
  meanMs: number;
  goodputTokensPerS: number;
  completed: number;
  requests: number;
}

/** One stream of one model: its inter-arrival CV (undefined for the trace itself, which has no target) and both arms. */
export interface KeystageStream {
  name: string;
  cv: number | undefined;
  keyStage: KeystageArm;
  wholePipeline: KeystageArm;
}

/** The checks of every stream with a target. */
export function keystageChecks(streams: readonly KeystageStream[]): Check[] {
  const checks: Check[] = [];
  for (const st of streams) {
    if (st.cv === undefined) continue;
    const k = st.keyStage;
    const w = st.wholePipeline;
    const unfinished = k.requests - k.completed;
    const note = unfinished > KEYSTAGE_TARGET.unfinishedRequests ? ` (key-stage left ${unfinished} of ${k.requests} unfinished)` : "";
    const done = note === "";
    if (st.cv >= 4) {
      // Compared as a product, not a ratio: a whole-pipeline goodput of 0 makes no +Infinity pass.
      const value = w.goodputTokensPerS > 0 ? k.goodputTokensPerS / w.goodputTokensPerS : Number.NaN;
      checks.push({ check: `${st.name}: goodput ratio${note}`, value, limit: KEYSTAGE_TARGET.goodputRatioAtCvGe4, ok: done && k.goodputTokensPerS > 0 && k.goodputTokensPerS >= KEYSTAGE_TARGET.goodputRatioAtCvGe4 * w.goodputTokensPerS });
    }
    if (st.cv >= 2) {
      const r = ratio(k.meanMs, w.meanMs);
      const value = Number.isNaN(r) ? Number.NaN : 1 - r;
      checks.push({ check: `${st.name}: mean latency reduction${note}`, value, limit: KEYSTAGE_TARGET.meanLatencyReductionAtCvGe2, ok: done && atLeast(value, KEYSTAGE_TARGET.meanLatencyReductionAtCvGe2) });
    }
    if (st.cv === 0.1) {
      const value = ratio(k.meanMs, w.meanMs);
      checks.push({ check: `${st.name}: key-stage mean latency / whole-pipeline (and goodput not lower)${note}`, value, limit: 1, ok: done && atMost(value, 1) && k.goodputTokensPerS >= w.goodputTokensPerS });
    }
  }
  return checks;
}
