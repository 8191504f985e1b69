/**
 * bench:batch's verdict (test/bench/batch.ts). Both figures are medians over rounds that alternate the arm with its
 * baseline (A B, B A, …). A round counts only when both of its arms measured something: a batch that did not end
 * `completed` with every request answered, or an interactive arm with no stream, makes that round's ratio NaN,
 * and a NaN round fails the figure (an empty "beside" arm's mean is no data, not 0). So does a round in which an arm
 * failed a request (issue 45): the direct baseline's, or an interactive stream alone or beside; the check names the
 * arm and how many it failed over the rounds.
 */
import { atLeast, atMost, failuresNote, type ArmTally, type Check } from "./common.js";

/**
 * Issue 37 (issue 15 item 9 asked ≥ 0.8): batch fills ≥ 90% of what the engines carry directly; interactive TTFT
 * beside it ≤ 1.05×; and every run of a `--runs N` sequence meets both (`runsChecks`).
 */
export const BATCH_TARGET = { fillRatio: 0.9, ttftRatio: 1.05 };

/** One fill round: completion tokens/s straight to the engines and through the Batch API, and whether B finished. */
export interface FillRound {
  directTokensPerS: number;
  batchTokensPerS: number;
  /** The batch ended `completed` with no failed request. */
  batchComplete: boolean;
  /** Requests the direct arm sent, and those that failed (not a 200). */
  directRequests: number;
  directFailed: number;
}

/** One TTFT round: interactive TTFTs alone and beside a batch (from its first dispatched request to its end). */
export interface TtftRound {
  /** TTFTs of the streams that were served (a failed one has none). */
  aloneMs: readonly number[];
  besideMs: readonly number[];
  batchComplete: boolean;
  /** Interactive streams that failed (refused, cut, timed out) alone and beside. */
  aloneFailed: number;
  besideFailed: number;
}

/** Mean of `xs`; NaN for none (no data is not 0). */
export function meanOrNaN(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Median of `xs`; NaN for none, and NaN when any round is NaN (a round that measured nothing is not skipped). */
export function medianOfRounds(xs: readonly number[]): number {
  if (xs.length === 0 || xs.some((x) => Number.isNaN(x))) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** A fill round's ratio B / A (NaN unless both measured, the batch completed and the direct arm failed nothing). */
export function fillRatioOf(r: FillRound): number {
  return r.batchComplete && r.directFailed === 0 && r.directTokensPerS > 0 && Number.isFinite(r.directTokensPerS) && Number.isFinite(r.batchTokensPerS) ? r.batchTokensPerS / r.directTokensPerS : Number.NaN;
}

/** A TTFT round's ratio mean beside / mean alone (NaN when either arm is empty or failed a stream, or the batch did not complete). */
export function ttftRatioOf(r: TtftRound): number {
  const alone = meanOrNaN(r.aloneMs);
  const beside = meanOrNaN(r.besideMs);
  return r.batchComplete && r.aloneFailed === 0 && r.besideFailed === 0 && alone > 0 && Number.isFinite(alone) ? beside / alone : Number.NaN;
}

/** What failed in the fill rounds and in the TTFT rounds, summed over rounds, per arm (failuresNote's input). */
function fillTallies(fill: readonly FillRound[]): ArmTally[] {
  const sum = (f: (r: FillRound) => number) => fill.reduce((a, r) => a + f(r), 0);
  return [
    { arm: "direct", failed: sum((r) => r.directFailed), requests: sum((r) => r.directRequests) },
    { arm: "batch", failed: fill.filter((r) => !r.batchComplete).length, requests: fill.length, what: "batches not completed in full" },
  ];
}

function ttftTallies(ttft: readonly TtftRound[]): ArmTally[] {
  const sum = (f: (r: TtftRound) => number) => ttft.reduce((a, r) => a + f(r), 0);
  return [
    { arm: "alone", failed: sum((r) => r.aloneFailed), requests: sum((r) => r.aloneFailed + r.aloneMs.length), what: "streams failed" },
    { arm: "beside", failed: sum((r) => r.besideFailed), requests: sum((r) => r.besideFailed + r.besideMs.length), what: "streams failed" },
    { arm: "batch beside", failed: ttft.filter((r) => !r.batchComplete).length, requests: ttft.length, what: "batches not completed in full" },
  ];
}

/** Both figures and their checks. */
export function batchChecks(fill: readonly FillRound[], ttft: readonly TtftRound[]): { fillRatio: number; ttftRatio: number; checks: Check[] } {
  const fillRatio = medianOfRounds(fill.map(fillRatioOf));
  const ttftRatio = medianOfRounds(ttft.map(ttftRatioOf));
  const fillNote = failuresNote(fillTallies(fill));
  const ttftNote = failuresNote(ttftTallies(ttft));
  return {
    fillRatio,
    ttftRatio,
    checks: [
      { check: `fill ratio (batch / direct tokens/s, median of rounds)${fillNote}`, value: fillRatio, limit: BATCH_TARGET.fillRatio, ok: fillNote === "" && atLeast(fillRatio, BATCH_TARGET.fillRatio) },
      { check: `interactive TTFT beside a batch / alone (median of rounds)${ttftNote}`, value: ttftRatio, limit: BATCH_TARGET.ttftRatio, ok: ttftNote === "" && atMost(ttftRatio, BATCH_TARGET.ttftRatio) },
    ],
  };
}

/** One run of a `--runs N` sequence: its two figures (medians of its rounds). */
export interface RunFigures {
  fillRatio: number;
  ttftRatio: number;
}

/**
 * The checks of a sequence of runs (the issue asks five in a row, each meeting both targets): per figure, the worst
 * run against the target — the lowest fill ratio, the highest TTFT ratio; a run with no figure (NaN) fails it.
 */
export function runsChecks(runs: readonly RunFigures[]): { worstFillRatio: number; worstTtftRatio: number; checks: Check[] } {
  const fills = runs.map((r) => r.fillRatio);
  const ttfts = runs.map((r) => r.ttftRatio);
  const nan = (xs: number[]) => xs.length === 0 || xs.some((x) => Number.isNaN(x));
  const worstFillRatio = nan(fills) ? Number.NaN : Math.min(...fills);
  const worstTtftRatio = nan(ttfts) ? Number.NaN : Math.max(...ttfts);
  return {
    worstFillRatio,
    worstTtftRatio,
    checks: [
      { check: `fill ratio in every one of ${runs.length} runs (the lowest)`, value: worstFillRatio, limit: BATCH_TARGET.fillRatio, ok: atLeast(worstFillRatio, BATCH_TARGET.fillRatio) },
      { check: `interactive TTFT ratio in every one of ${runs.length} runs (the highest)`, value: worstTtftRatio, limit: BATCH_TARGET.ttftRatio, ok: atMost(worstTtftRatio, BATCH_TARGET.ttftRatio) },
    ],
  };
}
