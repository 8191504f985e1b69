/**
 * bench:keystage's verdict (test/bench/keystage.ts): key-stage (QUART) against the disk-loading whole-pipeline
 * baseline of QUART §8 per stream (`wholePipeline` is that baseline; the bench's equal-start ablation has no target). Both
 * arms' figures are over every request (test/bench/keystage-run.ts: an unfinished request is +Infinity latency and an
 * SLO miss), and a check passes only if both arms finished every request in every round: an unfinished key-stage
 * request is no pass whatever its latency over the rest, and a baseline that left some unfinished is no bar (issue 45:
 * its +Infinity mean made the reduction 100%, a pass). The check names the arm and how many it left. The figures are
 * compared as measured (medians over rounds, unrounded); the bench rounds only what it prints.
 */
import { median } from "../common.js";
import { atLeast, atMost, failuresNote, ratio, type Check } from "./common.js";

/** Targets (issues 13 and 35): at CV ≥ 4 goodput ≥ 2× the baseline's; at CV ≥ 2 mean latency ≥ 35% lower; at CV 0.1 not worse. */
export const KEYSTAGE_TARGET = { goodputRatioAtCvGe4: 2, meanLatencyReductionAtCvGe2: 0.35, notWorseAtCv01: true, unfinishedRequests: 0 };

/** One arm's medians over rounds; `completed`: the fewest finished in any round. */
export interface KeystageArm {
  meanMs: number;
  goodputTokensPerS: number;
  completed: number;
  requests: number;
}

/**
 * An arm's figures from its rounds: the medians of mean latency and goodput, unrounded (issue 45: the bench rounded
 * them to 0.1 ms and 0.001 tokens/s before the checks), and the fewest requests it finished in any round.
 */
export function keystageArmOf(rounds: readonly Pick<KeystageArm, "meanMs" | "goodputTokensPerS" | "completed" | "requests">[]): KeystageArm {
  if (rounds.length === 0) return { meanMs: Number.NaN, goodputTokensPerS: Number.NaN, completed: 0, requests: 0 };
  return {
    meanMs: median(rounds.map((r) => r.meanMs)),
    goodputTokensPerS: median(rounds.map((r) => r.goodputTokensPerS)),
    completed: Math.min(...rounds.map((r) => r.completed)),
    requests: rounds[0]!.requests,
  };
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
    const unfinished = (arm: string, a: KeystageArm) => ({ arm, failed: a.requests - a.completed, requests: a.requests, what: "requests unfinished" });
    const note = failuresNote([unfinished("key-stage", k), unfinished("whole-pipeline", w)]);
    const done = note === "";
    if (st.cv >= 4) {
      // A whole-pipeline goodput of 0 (or not a number) is no ratio: NaN, never a +Infinity pass.
      const value = ratio(k.goodputTokensPerS, w.goodputTokensPerS);
      checks.push({ check: `${st.name}: goodput ratio${note}`, value, limit: KEYSTAGE_TARGET.goodputRatioAtCvGe4, ok: done && k.goodputTokensPerS > 0 && atLeast(value, KEYSTAGE_TARGET.goodputRatioAtCvGe4) });
    }
    if (st.cv >= 2) {
      const r = ratio(k.meanMs, w.meanMs);
      const value = Number.isNaN(r) ? Number.NaN : 1 - r;
      checks.push({ check: `${st.name}: mean latency reduction${note}`, value, limit: KEYSTAGE_TARGET.meanLatencyReductionAtCvGe2, ok: done && atLeast(value, KEYSTAGE_TARGET.meanLatencyReductionAtCvGe2) });
    }
    if (st.cv === 0.1) {
      const value = ratio(k.meanMs, w.meanMs);
      checks.push({ check: `${st.name}: key-stage mean latency / whole-pipeline (and goodput not lower)${note}`, value, limit: 1, ok: done && atMost(value, 1) && Number.isFinite(k.goodputTokensPerS) && k.goodputTokensPerS >= w.goodputTokensPerS });
    }
  }
  return checks;
}
