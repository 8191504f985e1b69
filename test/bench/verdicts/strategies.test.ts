import { describe, expect, it } from "vitest";
import { recoveryMinutes } from "../../../sim/week/burst.js";
import { verdictOf } from "./common.js";
import { cheapestArm, compareArms, costAtSlo, costAtSloChecks, meets, recoversNoLater, winnersOf, type FrontierRun } from "./strategies.js";

const run = (knob: number, instanceHours: number, margin: number, extra: Partial<FrontierRun> = {}): FrontierRun => ({ knob, instanceHours, margin, batchAllWithinDeadline: true, sloMet: margin <= 1, ...extra });
const inf = Number.POSITIVE_INFINITY;

describe("bench:strategies: cost at the SLO on an arm's frontier (issue 46)", () => {
  it("interpolates the instance-hours where the margin crosses 1 between the cheapest met run and the next cheaper", () => {
    // A: 100 h at margin 0.8; B: 90 h at 1.3 → 100 − 10 × 0.2 / 0.5 = 96.
    const c = costAtSlo([run(0.4, 110, 0.5), run(0.5, 100, 0.8), run(0.6, 90, 1.3)]);
    expect(c.instanceHours).toBeCloseTo(96, 12);
    expect(c).toMatchObject({ bracketed: true, met: { knob: 0.5 }, missed: { knob: 0.6 } });
  });

  it("two arms a rung apart read as what they cost at the edge, not as a rung", () => {
    // Same frontier, sampled at different rungs: the same crossing.
    const f = (ih: number) => 1 + (100 - ih) / 20; // margin 1 at 100 h
    expect(costAtSlo([run(0.5, 104, f(104)), run(0.6, 94, f(94))]).instanceHours).toBeCloseTo(100, 9);
    expect(costAtSlo([run(0.45, 108, f(108)), run(0.55, 99, f(99))]).instanceHours).toBeCloseTo(100, 9);
  });

  it("no setting met: NaN (no pass); nothing cheaper ran: the cheapest that met, unbracketed", () => {
    expect(costAtSlo([run(0.2, 200, 1.2), run(0.3, 180, 2)]).instanceHours).toBeNaN();
    expect(costAtSlo([run(0.9, 50, 0.9)])).toMatchObject({ instanceHours: 50, bracketed: false });
  });

  it("a cheaper run on unserved requests, with late batches or judged a miss by the replay gives the met run's figure", () => {
    expect(costAtSlo([run(0.5, 100, 0.8), run(0.6, 90, inf)]).instanceHours).toBe(100);
    expect(costAtSlo([run(0.5, 100, 0.8), run(0.6, 90, 1.3, { batchAllWithinDeadline: false })]).instanceHours).toBe(100);
    // Judged a miss by the replay (a stream broken after its first token) with a margin under 1: not a met run, and
    // not interpolated toward.
    const broken = run(0.6, 90, 0.95, { sloMet: false });
    expect(meets(broken)).toBe(false);
    expect(costAtSlo([run(0.5, 100, 0.8), broken]).instanceHours).toBe(100);
    // A margin of NaN (no data) never meets.
    expect(meets(run(0.5, 100, Number.NaN, { sloMet: true }))).toBe(false);
  });

  it("compares arms week by week: mean, spread, and a tie when the mean is within the spread", () => {
    const c = compareArms([99, 102, 100.5], [100, 100, 100]);
    expect(c.mean).toBeCloseTo(0.005, 12);
    expect(c.tie).toBe(true);
    const d = compareArms([85, 88, 86], [100, 100, 100]);
    expect(d.mean).toBeCloseTo(-0.41 / 3, 12);
    expect(d.tie).toBe(false);
    // A week where either arm met the SLO at no setting: no number.
    expect(compareArms([85, Number.NaN, 86], [100, 100, 100]).mean).toBeNaN();
    expect(compareArms([85, 86], [100, 100, 100]).mean).toBeNaN();
    expect(compareArms([], []).mean).toBeNaN();
  });

  it("the winner is the cheapest arm with a cost every week, never the oracle; arms within the spread tie with it", () => {
    expect(cheapestArm({ "reactive-hpa": [100, 102], "predictive-hpa": [99, 100], oracle: [80, 81] })).toBe("predictive-hpa");
    expect(cheapestArm({ "reactive-hpa": [100, 102], "predictive-hpa": [90, Number.NaN] })).toBe("reactive-hpa");
    expect(cheapestArm({ oracle: [1] })).toBeUndefined();
    // +0.3% on average against per-week differences of −0.5% … +1%: a tie, both win.
    expect(winnersOf({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [100.4, 99.5, 101], "lt-ua": [110, 111, 112] })).toEqual(["reactive-hpa", "predictive-hpa"]);
    // +0.8% every week: no spread, no tie.
    expect(winnersOf({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [100.8, 100.8, 100.8] })).toEqual(["reactive-hpa"]);
  });

  const table = (network: Record<string, number[]>, sageserve: Record<string, number[]>) => ({ main: "network", sageserve: "sageserve-provision", costs: { network, "sageserve-provision": sageserve } });
  // The failed cost checks, as "regime vs baseline".
  const failed = (t: ReturnType<typeof table>) => costAtSloChecks(t, "predictive-hpa").filter((c) => !c.ok && c.check.includes("cost at the SLO")).map((c) => `${c.check.split(":")[0]} vs ${c.check.split(" / ")[1]!.split("'")[0]}`);

  it("meets: ≤ +1% of HPA with network loading, −12% / −30% with SageServe's delays, the cheapest, three weeks", () => {
    const ok = table({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [100.5, 99.5, 100.9], "lt-ua": [120, 121, 119], oracle: [95, 96, 97] }, { "reactive-hpa": [100, 110, 105], reactive: [130, 140, 135], "predictive-hpa": [88, 96, 92] });
    expect(costAtSloChecks(ok, "predictive-hpa").filter((c) => !c.ok)).toEqual([]);
  });

  it("each target just missed fails its check; a NaN or an Infinity never passes", () => {
    // +1.1% with network loading.
    expect(failed(table({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [101.1, 101.1, 101.1] }, { "reactive-hpa": [100, 100, 100], reactive: [200, 200, 200], "predictive-hpa": [80, 80, 80] }))).toEqual(["network vs reactive-hpa"]);
    // −9.9% vs HPA with SageServe's delays.
    expect(failed(table({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [100, 100, 100] }, { "reactive-hpa": [100, 100, 100], reactive: [200, 200, 200], "predictive-hpa": [90.1, 90.1, 90.1] }))).toEqual(["sageserve-provision vs reactive-hpa"]);
    // −24.9% vs reactive.
    expect(failed(table({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [100, 100, 100] }, { "reactive-hpa": [90, 90, 90], reactive: [100, 100, 100], "predictive-hpa": [75.1, 75.1, 75.1] }))).toEqual(["sageserve-provision vs reactive"]);
    // A week where HPA (the baseline) met the SLO at no setting: no ratio, a miss — never a pass.
    expect(costAtSloChecks(table({ "reactive-hpa": [100, Number.NaN, 100], "predictive-hpa": [100, 100, 100] }, { "reactive-hpa": [100, 100, 100], reactive: [200, 200, 200], "predictive-hpa": [80, 80, 80] }), "predictive-hpa")[0]).toMatchObject({ ok: false });
    // An Infinity cost (never served) is no ratio either.
    expect(costAtSloChecks(table({ "reactive-hpa": [100, 100, 100], "predictive-hpa": [inf, 100, 100] }, { "reactive-hpa": [100, 100, 100], reactive: [200, 200, 200], "predictive-hpa": [80, 80, 80] }), "predictive-hpa")[0]).toMatchObject({ ok: false });
  });

  it("a cheaper arm than the default fails the winner check; fewer than three weeks fail; shrunk runs are never met", () => {
    const cheaper = costAtSloChecks(table({ "reactive-hpa": [99, 99, 99], "predictive-hpa": [99.5, 99.5, 99.5] }, { "reactive-hpa": [100, 100, 100], reactive: [200, 200, 200], "predictive-hpa": [80, 80, 80] }), "predictive-hpa");
    expect(cheaper.find((c) => c.check.includes("cheapest"))).toMatchObject({ ok: false });
    const two = costAtSloChecks(table({ "reactive-hpa": [100, 100], "predictive-hpa": [100, 100] }, { "reactive-hpa": [100, 100], reactive: [200, 200], "predictive-hpa": [80, 80] }), "predictive-hpa");
    expect(two.find((c) => c.check.includes("weeks judged"))).toMatchObject({ ok: false });
    expect(verdictOf([{ check: "x", ok: true }], ["--weeks 42"]).met).toBe(false);
  });

  it("a burst neither side recovers from is not recovered 'no later'", () => {
    const never = recoveryMinutes(Float64Array.from([inf, inf, inf]), 0, 500, 2);
    expect(never).toBe(inf);
    expect(recoversNoLater(never, never)).toBe(false);
    expect(recoversNoLater(4, never)).toBe(true);
    expect(recoversNoLater(4, 3)).toBe(false);
  });
});
