import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { ROUTER_ARMS, ROUTER_TARGET, armOrder, routerChecks, routerFiguresOf, type RouterArm, type RouterFigures, type RouterRounds } from "./router.js";

// Issue 45: every check of bench:router fails on a failed arm it compares, a NaN, an Infinity and a figure just past
// its limit; the medians are compared unrounded; the arms run in a seeded order shuffled per round.

const streams = (failed: Partial<Record<RouterArm, number>> = {}): RouterFigures["streams"] => Object.fromEntries(ROUTER_ARMS.map((a) => [a, { failed: failed[a] ?? 0, total: 760 }])) as RouterFigures["streams"];
const GOOD: RouterFigures = { throughputVsNginx: 0.99, addedTtftP50Ms: 2, nginxAddedTtftP50Ms: 1, addedTtftP50MsSingleStream: 0.4, cpuUsPerToken: { global: 9, region: 9.5 }, cpuVsNodePipe: { global: 1.2, region: 1.4 }, streams: streams() };
const T = ROUTER_TARGET;
const checkOf = (f: RouterFigures, name: string) => routerChecks(f).find((c) => c.check === name || c.check.startsWith(`${name} (`))!;
/** Each check: what it reads (a figure setter), its limit, and which way it fails (past = over for ≤, under for ≥). */
const FIGURES: { name: string; set: (x: number) => Partial<RouterFigures>; limit: number; atMost: boolean; arms: RouterArm[] }[] = [
  { name: "throughput", set: (x) => ({ throughputVsNginx: x }), limit: T.throughputVsNginx, atMost: false, arms: ["tidegate", "nginx"] },
  { name: "addedTtft32Streams", set: (x) => ({ addedTtftP50Ms: x }), limit: T.addedTtftP50VsNginx * GOOD.nginxAddedTtftP50Ms, atMost: true, arms: ["tidegate", "nginx", "direct"] },
  { name: "addedTtftSingleStream", set: (x) => ({ addedTtftP50MsSingleStream: x }), limit: T.addedTtftP50MsSingleStream, atMost: true, arms: ["tidegate", "direct"] },
  { name: "cpuGlobal", set: (x) => ({ cpuUsPerToken: { ...GOOD.cpuUsPerToken, global: x } }), limit: T.cpuUsPerTokenPerHop, atMost: true, arms: ["tidegate"] },
  { name: "cpuRegion", set: (x) => ({ cpuUsPerToken: { ...GOOD.cpuUsPerToken, region: x } }), limit: T.cpuUsPerTokenPerHop, atMost: true, arms: ["tidegate"] },
  { name: "cpuGlobalVsNodePipe", set: (x) => ({ cpuVsNodePipe: { ...GOOD.cpuVsNodePipe, global: x } }), limit: T.cpuVsNodePipePerHop, atMost: true, arms: ["tidegate", "pipe"] },
  { name: "cpuRegionVsNodePipe", set: (x) => ({ cpuVsNodePipe: { ...GOOD.cpuVsNodePipe, region: x } }), limit: T.cpuVsNodePipePerHop, atMost: true, arms: ["tidegate", "pipe"] },
];
const JUST = 1e-6;

describe("bench:router verdict, issue 45", () => {
  it("meets with every figure in bounds", () => {
    expect(verdictOf(routerChecks(GOOD))).toEqual({ met: true, missed: [] });
  });

  it("an arm that failed a stream fails every check that compares it, naming it and how many", () => {
    for (const arm of ROUTER_ARMS) {
      const f = { ...GOOD, streams: streams({ [arm]: 2 }) };
      for (const c of FIGURES) {
        const check = checkOf(f, c.name);
        expect(check.ok, `${c.name} ${arm}`).toBe(!c.arms.includes(arm));
        if (c.arms.includes(arm)) expect(check.check).toBe(`${c.name} (${arm}: 2 of 760 streams failed)`);
      }
      expect(checkOf(f, "noFailedStreams").ok).toBe(false);
    }
    expect(checkOf({ ...GOOD, streams: streams({ nginx: 1 }) }, "addedTtftSingleStreamTwoHops").ok).toBe(true);
    expect(checkOf({ ...GOOD, streams: streams({ direct: 1 }) }, "addedTtftSingleStreamTwoHops").ok).toBe(false);
  });

  it("NaN or +Infinity in any figure fails its check", () => {
    for (const c of FIGURES) for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) expect(checkOf({ ...GOOD, ...c.set(x) }, c.name).ok, `${c.name} ${x}`).toBe(false);
    expect(checkOf({ ...GOOD, nginxAddedTtftP50Ms: Number.POSITIVE_INFINITY }, "addedTtft32Streams").ok).toBe(false);
    expect(checkOf({ ...GOOD, streams: streams({ tidegate: Number.NaN }) }, "noFailedStreams").ok).toBe(false);
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    for (const c of FIGURES) {
      const past = c.atMost ? c.limit * (1 + JUST) : c.limit * (1 - JUST);
      const inside = c.atMost ? c.limit * (1 - JUST) : c.limit * (1 + JUST);
      expect(checkOf({ ...GOOD, ...c.set(past) }, c.name).ok, `${c.name} past`).toBe(false);
      expect(checkOf({ ...GOOD, ...c.set(inside) }, c.name).ok, `${c.name} inside`).toBe(true);
    }
    expect(checkOf({ ...GOOD, addedTtftP50MsSingleStream: T.addedTtftP50MsSingleStreamTwoHops * (1 + JUST) }, "addedTtftSingleStreamTwoHops").ok).toBe(false);
  });

  it("the medians are judged unrounded: 10.04 µs CPU per token in every round is over 10", () => {
    const five = (x: number) => [x, x, x, x, x];
    const rounds: RouterRounds = { throughputVsNginx: five(0.99), addedTtftP50Ms: five(2), nginxAddedTtftP50Ms: five(1), addedTtftP50MsSingleStream: five(0.4), cpuUsPerTokenGlobal: five(10.04), cpuUsPerTokenRegion: five(9.5), cpuVsNodePipeGlobal: five(1.2), cpuVsNodePipeRegion: five(1.4) };
    const f = routerFiguresOf(rounds, streams());
    expect(f.cpuUsPerToken.global).toBe(10.04);
    expect(verdictOf(routerChecks(f)).missed).toEqual(["cpuGlobal"]);
    expect(routerFiguresOf({ ...rounds, addedTtftP50MsSingleStream: [0.5004, 0.5004, 0.5004] }, streams()).addedTtftP50MsSingleStream).toBe(0.5004);
    expect(routerFiguresOf({ ...rounds, throughputVsNginx: [0.99, Number.NaN, 0.99] }, streams()).throughputVsNginx).toBeNaN();
  });

  it("the arms run in an order shuffled per round from a fixed seed: every arm, not always the same order", () => {
    const orders = Array.from({ length: 8 }, (_, i) => armOrder(i + 1));
    for (const o of orders) expect([...o].sort()).toEqual([...ROUTER_ARMS].sort());
    expect(orders.map((o) => o.join())).toEqual(Array.from({ length: 8 }, (_, i) => armOrder(i + 1).join())); // seeded
    expect(new Set(orders.map((o) => o.join())).size).toBeGreaterThan(1);
    expect(new Set(orders.map((o) => o[0])).size).toBeGreaterThan(1); // no arm always first
  });
});
