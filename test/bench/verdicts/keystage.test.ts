import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { KEYSTAGE_TARGET, keystageArmOf, keystageChecks, type KeystageArm, type KeystageStream } from "./keystage.js";

// Issue 45: every check of bench:keystage fails on an unfinished baseline, a NaN, an Infinity and a figure just past
// its limit; and the medians are compared unrounded.

const arm = (meanMs: number, goodputTokensPerS: number, completed = 3000): KeystageArm => ({ meanMs, goodputTokensPerS, completed, requests: 3000 });
const stream = (cv: number, keyStage: KeystageArm, wholePipeline: KeystageArm): KeystageStream => ({ name: `cv${cv}`, cv, keyStage, wholePipeline });
/** Streams that meet every target: CV 8 and 4 (goodput ≥ 2×, mean ≥ 35% lower), CV 2 (mean), CV 0.1 (not worse). */
const GOOD = (): KeystageStream[] => [stream(8, arm(3000, 30), arm(6000, 10)), stream(4, arm(3000, 30), arm(6000, 10)), stream(2, arm(3000, 30), arm(6000, 10)), stream(0.1, arm(1000, 20), arm(1000, 20))];
const JUST = 1e-6;

describe("bench:keystage verdict, issue 45", () => {
  it("meets when key-stage beats the baseline on every stream", () => {
    expect(verdictOf(keystageChecks(GOOD()))).toEqual({ met: true, missed: [] });
    expect(keystageChecks(GOOD())).toHaveLength(6);
  });

  it("a baseline that left requests unfinished fails every check of its stream, naming it (its 9e9 ms mean used to pass)", () => {
    const unfinished = arm(Number.POSITIVE_INFINITY, 10, 2990);
    for (const cv of [8, 4, 2, 0.1]) {
      const checks = keystageChecks([stream(cv, arm(3000, 30), unfinished)]);
      expect(checks.length, `cv ${cv}`).toBeGreaterThan(0);
      for (const c of checks) expect(c, `cv ${cv}`).toMatchObject({ ok: false, check: expect.stringContaining("(whole-pipeline: 10 of 3000 requests unfinished)") });
    }
    // A finite mean from a baseline that left requests out is no bar either.
    expect(keystageChecks([stream(2, arm(3000, 30), arm(9e9, 10, 2999))])[0]!.ok).toBe(false);
  });

  it("key-stage leaving requests unfinished fails every check, naming it", () => {
    const checks = keystageChecks([stream(8, arm(1000, 50, 2990), arm(5000, 10))]);
    expect(checks.every((c) => !c.ok && c.check.includes("(key-stage: 10 of 3000 requests unfinished)"))).toBe(true);
  });

  it("NaN or +Infinity in any figure fails", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      for (const s of [stream(8, arm(3000, x), arm(6000, 10)), stream(8, arm(3000, 30), arm(6000, x)), stream(2, arm(x, 30), arm(6000, 10)), stream(2, arm(3000, 30), arm(x, 10)), stream(0.1, arm(x, 20), arm(1000, 20)), stream(0.1, arm(1000, 20), arm(x, 20)), stream(0.1, arm(1000, x), arm(1000, 20))]) {
        expect(verdictOf(keystageChecks([s])).met, `${s.name} ${JSON.stringify(s)}`).toBe(false);
      }
    }
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    const T = KEYSTAGE_TARGET;
    const met = (s: KeystageStream) => verdictOf(keystageChecks([s])).met;
    // CV 4: goodput 2× (mean well ahead).
    expect(met(stream(4, arm(1000, 10 * T.goodputRatioAtCvGe4 * (1 - JUST)), arm(6000, 10)))).toBe(false);
    expect(met(stream(4, arm(1000, 10 * T.goodputRatioAtCvGe4 * (1 + JUST)), arm(6000, 10)))).toBe(true);
    // CV 2: mean ≥ 35% lower.
    expect(met(stream(2, arm(6000 * (1 - T.meanLatencyReductionAtCvGe2) * (1 + JUST), 30), arm(6000, 10)))).toBe(false);
    expect(met(stream(2, arm(6000 * (1 - T.meanLatencyReductionAtCvGe2) * (1 - JUST), 30), arm(6000, 10)))).toBe(true);
    // CV 0.1: mean not higher, goodput not lower.
    expect(met(stream(0.1, arm(1000 * (1 + JUST), 20), arm(1000, 20)))).toBe(false);
    expect(met(stream(0.1, arm(1000, 20 * (1 - JUST)), arm(1000, 20)))).toBe(false);
    expect(met(stream(0.1, arm(1000 * (1 - JUST), 20), arm(1000, 20)))).toBe(true);
  });

  it("the rounds' medians are compared unrounded: 650.04 ms against 1000 is a 34.996% reduction, a miss", () => {
    const rounds = (meanMs: number, goodputTokensPerS: number) => [1, 2, 3].map(() => ({ meanMs, goodputTokensPerS, completed: 3000, requests: 3000 }));
    expect(keystageArmOf(rounds(650.04, 12.3456))).toEqual({ meanMs: 650.04, goodputTokensPerS: 12.3456, completed: 3000, requests: 3000 });
    const checks = keystageChecks([{ name: "cv2", cv: 2, keyStage: keystageArmOf(rounds(650.04, 30)), wholePipeline: keystageArmOf(rounds(1000, 10)) }]);
    expect(checks[0]!.ok).toBe(false);
    expect(checks[0]!.value).toBeCloseTo(0.34996, 6);
    expect(keystageArmOf([{ meanMs: 1, goodputTokensPerS: 1, completed: 3000, requests: 3000 }, { meanMs: 2, goodputTokensPerS: 2, completed: 2999, requests: 3000 }, { meanMs: 3, goodputTokensPerS: 3, completed: 3000, requests: 3000 }])).toEqual({ meanMs: 2, goodputTokensPerS: 2, completed: 2999, requests: 3000 });
  });
});
