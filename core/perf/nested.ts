/**
 * Nested leave-one-configuration-out (issue 36): the fit's one choice (fit.ts FitOptions: the weight of the sibling
 * sweep's estimate of an imputed knot) made on training folds only, inside every outer fold.
 *
 * Plain LOCO (evaluate.ts leaveConfigOut) scores the shipped choice, which was picked by looking at the same LOCO
 * figure: an optimistic score. Here, for each outer configuration k (one measured (prompt, batch) point of one
 * (model, GPU, TP), evaluate.ts configKey):
 *   1. the training set is every run but k's (k is gone from its own profile and from every peer curve);
 *   2. each candidate is scored by an inner LOCO on that training set alone (every other configuration left out in
 *      turn, k absent from every inner fit), and the candidate with the lowest inner TTFT MAPE is chosen (ties: the
 *      first listed);
 *   3. k's profile is fitted on the training set with the chosen candidate and predicts k's runs.
 * The outer errors, row-weighted over every configuration, are the figure (NaN when nothing was scored: no data).
 * TPOT does not depend on the choice (decode is fitted without imputation), so it is the same as plain LOCO.
 */
import type { MeasuredRow } from "./data.js";
import { RowWeighted, configKey, leaveConfigOut, peersOf } from "./evaluate.js";
import { errorOn, fitProfile, groupRows, rawPrefillCurves, type FitOptions, type PrefillCurves } from "./fit.js";

/**
 * The candidates nested CV chooses from: the sibling weight on a grid of tenths over [0, 1] (0: the peers'
 * regression alone, as before the sibling sweep; 1: the sibling estimate alone; ½: equal weights, what ships). The
 * finest grid engines/README.md reports; a coarser one is no more honest, only luckier.
 */
export const FIT_CANDIDATES: readonly FitOptions[] = Array.from({ length: 11 }, (_, i) => ({ siblingWeight: i / 10 }));

/** The candidate with the lowest LOCO TTFT MAPE on `rows` (ties: the first listed): the selection step, on its own. */
export function chooseFit(rows: readonly MeasuredRow[], candidates: readonly FitOptions[] = FIT_CANDIDATES): { index: number; options: FitOptions; ttftMape: number } {
  if (candidates.length === 0) throw new RangeError("chooseFit: no candidates");
  let index = 0;
  let best = Number.POSITIVE_INFINITY;
  candidates.forEach((c, i) => {
    const m = leaveConfigOut(rows, configKey, c).ttftMape;
    if (m < best) {
      index = i;
      best = m;
    }
  });
  return { index, options: candidates[index]!, ttftMape: best };
}

export interface NestedReport {
  /** Row-weighted outer MAPE over every configuration (fractions; NaN when no run was scored). */
  ttftMape: number;
  tpotMape: number;
  ttftRows: number;
  tpotRows: number;
  configurations: number;
  /** How often each candidate was chosen (candidate index → outer folds). */
  chosen: number[];
}

/** Nested LOCO of the fit over `candidates` (see the file comment). */
export function nestedLeaveConfigOut(rows: readonly MeasuredRow[], candidates: readonly FitOptions[] = FIT_CANDIDATES): NestedReport {
  const configs = [...new Set(rows.map(configKey))].sort();
  const chosen = candidates.map(() => 0);
  const total = new RowWeighted();
  for (const k of configs) {
    const train = rows.filter((r) => configKey(r) !== k);
    const test = rows.filter((r) => configKey(r) === k);
    const best = chooseFit(train, candidates).index;
    chosen[best]!++;
    const groups = groupRows(train);
    const raw = new Map<string, PrefillCurves>([...groups.entries()].map(([key, g]) => [key, rawPrefillCurves(g)]));
    const key = [...groupRows(test).keys()][0]!;
    const own = groups.get(key);
    if (own === undefined) throw new Error(`nestedLeaveConfigOut: ${key} has no runs besides ${k}`);
    total.add(errorOn(fitProfile(own, peersOf(raw, key), candidates[best]!), test));
  }
  return {
    ...total.total(),
    configurations: configs.length,
    chosen,
  };
}
