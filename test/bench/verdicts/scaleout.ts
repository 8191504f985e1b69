/**
 * bench:scaleout's verdict (test/bench/scaleout.ts). Each N must have a row, and each row's transfer time must be
 * the data plane's own (first byte at a target to the last verified byte; region/pool/transfer.ts dataPlaneMs): a
 * missing or non-positive transfer time is no data, never a smaller overhead or a larger allowance.
 */
import { atMost, type Check } from "./common.js";

/** Control-plane overhead ≤ max(0.15 × transfer, 300 ms) at every N (issue 9). */
export const SCALEOUT_TARGET = { overheadFractionOfTransfer: 0.15, overheadFloorMs: 300, ns: [2, 4, 8] };

/** One scale-out 1 → 1 + n: decision to the last new instance's first token, and the data plane's part of it. */
export interface ScaleoutRow {
  n: number;
  totalMs: number;
  /** The data plane's own time for the plan (dataPlaneMs), ms. */
  transferMs: number;
}

/** What a row's overhead may be. */
export function allowedOverheadMs(transferMs: number): number {
  return Math.max(SCALEOUT_TARGET.overheadFractionOfTransfer * transferMs, SCALEOUT_TARGET.overheadFloorMs);
}

/** One check per N of the target (a missing N fails). */
export function scaleoutChecks(rows: readonly ScaleoutRow[]): Check[] {
  return SCALEOUT_TARGET.ns.map((n) => {
    const r = rows.find((x) => x.n === n);
    if (r === undefined) return { check: `1 → ${1 + n}: not run`, value: Number.NaN, limit: SCALEOUT_TARGET.overheadFloorMs, ok: false };
    const measured = Number.isFinite(r.transferMs) && r.transferMs > 0 && Number.isFinite(r.totalMs);
    const overhead = measured ? r.totalMs - r.transferMs : Number.NaN;
    const limit = measured ? allowedOverheadMs(r.transferMs) : SCALEOUT_TARGET.overheadFloorMs;
    return { check: `1 → ${1 + n}: control-plane overhead ms${measured ? "" : " (no data-plane time)"}`, value: overhead, limit, ok: measured && atMost(overhead, limit) };
  });
}
