import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { dataplaneMet, type DataplaneFigures } from "./dataplane.js";
import { REPLAY_TARGET, replayChecks, type ReplayFigures } from "./replay.js";
import { SCALEOUT_TARGET, allowedOverheadMs, scaleoutChecks, type ScaleoutRow } from "./scaleout.js";

// Issue 45 for the verdicts whose targets are absolute or against a bound the bench measures (bench:replay,
// bench:scaleout, bench:dataplane): a NaN, an Infinity and a figure just past each limit fail; for dataplane, so does
// a baseline (the binary tree) that did not finish.

const JUST = 1e-6;

describe("bench:replay verdict, issue 45", () => {
  const GOOD: ReplayFigures = { replayWallMs: 900, requests: 100, served: 100, ttftMape: 0.02, tpotMape: 0.02, nestedLocoTtftMape: 0.03, nestedLocoTpotMape: 0.03 };
  const T = REPLAY_TARGET;
  const FIGURES: [keyof ReplayFigures, number][] = [["replayWallMs", T.replayWallMs], ["ttftMape", T.ttftMape], ["tpotMape", T.tpotMape], ["nestedLocoTtftMape", T.nestedLocoTtftMape], ["nestedLocoTpotMape", T.nestedLocoTpotMape]];
  const met = (f: Partial<ReplayFigures>) => verdictOf(replayChecks({ ...GOOD, ...f })).met;

  it("NaN, +Infinity and just over each limit fail; just under passes; an unserved request fails", () => {
    expect(met({})).toBe(true);
    for (const [k, limit] of FIGURES) {
      expect(met({ [k]: Number.NaN }), `${k} NaN`).toBe(false);
      expect(met({ [k]: Number.POSITIVE_INFINITY }), `${k} Infinity`).toBe(false);
      expect(met({ [k]: limit * (1 + JUST) }), `${k} over`).toBe(false);
      expect(met({ [k]: limit * (1 - JUST) }), `${k} under`).toBe(true);
    }
    expect(met({ served: 99 })).toBe(false);
    expect(met({ requests: 0, served: 0 })).toBe(false);
  });
});

describe("bench:scaleout verdict, issue 45", () => {
  const rows = (over: Partial<ScaleoutRow> = {}): ScaleoutRow[] => SCALEOUT_TARGET.ns.map((n) => ({ n, totalMs: 2200, transferMs: 2000, ...(n === 2 ? over : {}) }));
  const met = (over: Partial<ScaleoutRow>) => verdictOf(scaleoutChecks(rows(over))).met;

  it("NaN, +Infinity and just over the allowed overhead fail (at the floor and above it); just under passes", () => {
    expect(met({})).toBe(true);
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(met({ totalMs: x }), `total ${x}`).toBe(false);
      expect(met({ transferMs: x }), `transfer ${x}`).toBe(false); // a transfer that never finished is no allowance
    }
    for (const transferMs of [1000, 4000]) {
      const allowed = allowedOverheadMs(transferMs);
      expect(met({ transferMs, totalMs: transferMs + allowed * (1 + JUST) }), `${transferMs} over`).toBe(false);
      expect(met({ transferMs, totalMs: transferMs + allowed * (1 - JUST) }), `${transferMs} under`).toBe(true);
    }
  });
});

describe("bench:dataplane verdict, issue 45", () => {
  const target = { p2pFractionOfRawTcp: 0.9, multicastTimeOverIdealMax: 1.15, nodes: [2, 4], binomialOverTreeMin: 1.5, speedupNodes: 9 };
  const good = (): DataplaneFigures => ({
    error: undefined,
    p2pFraction: 0.95,
    notRun: undefined,
    multicast: { N2: { chain: { ratio: 1.05 }, binomial: { ratio: 1.06 } }, N4: { chain: { ratio: 1.08 }, binomial: { ratio: 1.09 } }, N9: { binomial: { ratio: 1.1, seconds: 20 }, tree: { ratio: 1.05, seconds: 40 } } },
    hetero: { bandwidthFirstCopyS: 1, insertionFirstCopyS: 2 },
    shrunk: [],
  });
  const withN9 = (tree: number, binomial = 20): DataplaneFigures => ({ ...good(), multicast: { ...good().multicast, N9: { binomial: { ratio: 1.1, seconds: binomial }, tree: { ratio: 1.05, seconds: tree } } } });
  const withChain = (ratio: number): DataplaneFigures => ({ ...good(), multicast: { ...good().multicast, N4: { chain: { ratio }, binomial: { ratio: 1.09 } } } });

  it("a binary tree (the baseline) that never finished, or took no time, is no bar", () => {
    expect(dataplaneMet(good(), target)).toBe(true);
    expect(dataplaneMet(withN9(Number.POSITIVE_INFINITY), target)).toBe(false);
    expect(dataplaneMet(withN9(Number.NaN), target)).toBe(false);
    expect(dataplaneMet(withN9(40, 0), target)).toBe(false);
  });

  it("NaN, +Infinity and just past each limit fail; just inside passes", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(dataplaneMet({ ...good(), p2pFraction: x }, target), `p2p ${x}`).toBe(false);
      expect(dataplaneMet(withChain(x), target), `chain ${x}`).toBe(false);
      expect(dataplaneMet(withN9(40, x), target), `binomial ${x}`).toBe(false);
    }
    expect(dataplaneMet({ ...good(), p2pFraction: target.p2pFractionOfRawTcp * (1 - JUST) }, target)).toBe(false);
    expect(dataplaneMet({ ...good(), p2pFraction: target.p2pFractionOfRawTcp * (1 + JUST) }, target)).toBe(true);
    expect(dataplaneMet(withChain(target.multicastTimeOverIdealMax * (1 + JUST)), target)).toBe(false);
    expect(dataplaneMet(withChain(target.multicastTimeOverIdealMax * (1 - JUST)), target)).toBe(true);
    expect(dataplaneMet(withN9(20 * target.binomialOverTreeMin * (1 - JUST)), target)).toBe(false);
    expect(dataplaneMet(withN9(20 * target.binomialOverTreeMin * (1 + JUST)), target)).toBe(true);
  });
});
