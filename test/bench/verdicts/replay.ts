/**
 * bench:replay's verdict (test/bench/replay.ts). The performance model's errors are NaN when there was nothing to
 * score (core/perf: no held-out rows is "no data", not 0%) and NaN fails. The LOCO figure held to the
 * target is the nested one (core/perf/nested.ts: the fit's choice made on training folds only); plain
 * LOCO scored the choice on the data it was picked on and is printed for comparison only.
 */
import { atMost, type Check } from "./common.js";

/** Issue 2 (replay wall time, absolute: see README "Benchmarks") and issue 11/36 (model error) targets. */
export const REPLAY_TARGET = { replayWallMs: 2000, ttftMape: 0.05, tpotMape: 0.05, nestedLocoTtftMape: 0.05, nestedLocoTpotMape: 0.05, unservedRequests: 0 };

/** What the checks read. */
export interface ReplayFigures {
  replayWallMs: number;
  requests: number;
  served: number;
  ttftMape: number;
  tpotMape: number;
  nestedLocoTtftMape: number;
  nestedLocoTpotMape: number;
}

/** Every check of bench:replay. */
export function replayChecks(f: ReplayFigures): Check[] {
  const t = REPLAY_TARGET;
  return [
    { check: "replay wall ms (median of rounds)", value: f.replayWallMs, limit: t.replayWallMs, ok: atMost(f.replayWallMs, t.replayWallMs) },
    { check: "held-out TTFT MAPE", value: f.ttftMape, limit: t.ttftMape, ok: atMost(f.ttftMape, t.ttftMape) },
    { check: "held-out TPOT MAPE", value: f.tpotMape, limit: t.tpotMape, ok: atMost(f.tpotMape, t.tpotMape) },
    { check: "nested LOCO TTFT MAPE", value: f.nestedLocoTtftMape, limit: t.nestedLocoTtftMape, ok: atMost(f.nestedLocoTtftMape, t.nestedLocoTtftMape) },
    { check: "nested LOCO TPOT MAPE", value: f.nestedLocoTpotMape, limit: t.nestedLocoTpotMape, ok: atMost(f.nestedLocoTpotMape, t.nestedLocoTpotMape) },
    { check: "unserved requests", value: f.requests - f.served, limit: t.unservedRequests, ok: f.requests > 0 && f.served === f.requests },
  ];
}
