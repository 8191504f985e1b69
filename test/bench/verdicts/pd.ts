/**
 * bench:pd's verdict (issue 48): DistServe's goodput — the highest request rate at which ≥ 90% of requests meet
 * TTFT ≤ max(1 s, 2 × unloaded) and TPOT ≤ 100 ms — for colocated instances prefilling in chunks (vLLM V1's default)
 * and for disaggregated prefill and decode pools at their best ratio, on the same GPUs. Pure: the bench runs the
 * fleet, these judge it (verdicts.test.ts shows each failure mode).
 */
import { atLeast, ratio, type Check } from "./common.js";

export const PD_TARGET = {
  /** Share of requests that must meet both SLOs at a rate for the rate to count (DistServe's 90% attainment). */
  attainment: 0.9,
  ttftFloorMs: 1000,
  /** × the request's unloaded TTFT (its prompt's prefill on an idle instance). */
  ttftUnloadedFactor: 2,
  tpotMs: 100,
  /** Disaggregated goodput ÷ colocated, per trace (Splitwise: 1.4× throughput; DistServe: up to 4.48× rate). */
  minRatio: { "azure-code": 1.3, "azure-conv": 0.95 } as Readonly<Record<string, number>>,
} as const;

/** One request as the bench measured it: undefined times for a request that never got its first token or never ended. */
export interface PdRecord {
  unloadedTtftMs: number;
  ttftMs?: number;
  /** Mean time per output token after the first (0 with one output token); undefined when it never ended. */
  tpotMs?: number;
}

/** Whether a request met both SLOs: its TTFT under max(1 s, 2 × unloaded), its TPOT under 100 ms; unserved never does. */
export function meetsPdSlo(r: PdRecord): boolean {
  if (r.ttftMs === undefined || r.tpotMs === undefined) return false;
  return r.ttftMs <= Math.max(PD_TARGET.ttftFloorMs, PD_TARGET.ttftUnloadedFactor * r.unloadedTtftMs) && r.tpotMs <= PD_TARGET.tpotMs;
}

/** Share of `records` that met both SLOs (0 for none). */
export function attainment(records: readonly PdRecord[]): number {
  if (records.length === 0) return 0;
  let ok = 0;
  for (const r of records) if (meetsPdSlo(r)) ok++;
  return ok / records.length;
}

/**
 * The highest rate multiplier at which `passes` holds, from `start`: doubling while it holds (halving until it does),
 * then `bisections` halvings of the bracket (the answer within 2^-bisections of the bracket's width). 0 when no
 * multiplier down to start / 2^10 passes. Goodput falls with the rate, so a bracket holds its edge; a non-monotone
 * run is read at the first edge found.
 */
export async function maxPassingRate(passes: (multiplier: number) => Promise<boolean>, start = 1, bisections = 5): Promise<number> {
  let lo: number;
  let hi: number;
  if (await passes(start)) {
    lo = start;
    hi = start * 2;
    for (let i = 0; i < 10 && (await passes(hi)); i++) {
      lo = hi;
      hi *= 2;
    }
  } else {
    hi = start;
    lo = start / 2;
    let found = false;
    for (let i = 0; i < 10; i++) {
      if (await passes(lo)) {
        found = true;
        break;
      }
      hi = lo;
      lo /= 2;
    }
    if (!found) return 0;
  }
  for (let i = 0; i < bisections; i++) {
    const mid = (lo + hi) / 2;
    if (await passes(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * The split threshold (routing.pdMinPrefillTokens) that wins: per threshold, its best P:D goodput ÷ colocated on each
 * trace, combined by the geometric mean over the traces; the highest wins (a NaN ratio scores 0). `ratios[trace][t]`.
 */
export function winningThreshold(ratios: Readonly<Record<string, Readonly<Record<number, number>>>>): { threshold: number; score: Record<number, number> } {
  const traces = Object.keys(ratios);
  const thresholds = [...new Set(traces.flatMap((t) => Object.keys(ratios[t]!).map(Number)))].sort((a, b) => a - b);
  const score: Record<number, number> = {};
  for (const th of thresholds) {
    const vals = traces.map((t) => ratios[t]![th] ?? Number.NaN);
    score[th] = vals.every((v) => Number.isFinite(v) && v > 0) ? Math.exp(vals.reduce((a, v) => a + Math.log(v), 0) / vals.length) : 0;
  }
  const threshold = thresholds.reduce((a, b) => (score[b]! > score[a]! ? b : a), thresholds[0] ?? Number.NaN);
  return { threshold, score };
}

/** The per-trace check: disaggregated goodput (req/s) ÷ colocated ≥ the trace's target; a colocated 0 is no baseline. */
export function pdCheck(trace: string, colocatedRate: number, disaggregatedRate: number): Check {
  const limit = PD_TARGET.minRatio[trace] ?? Number.NaN;
  const value = ratio(disaggregatedRate, colocatedRate);
  return { check: `${trace}: disaggregated goodput ÷ colocated (chunked prefill) at the same GPUs`, value, limit, ok: atLeast(value, limit) };
}
