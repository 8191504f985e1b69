// RoleSpec.paceBytesPerS (TCP): a paced sender starts block i no earlier than its loop start + (bytes of blocks
// 0..i−1) / rate. Only lower bounds are asserted (a busy machine may be slower than the pace, never faster).
import { afterEach, describe, expect, it } from "vitest";
import { Endpoint, type RunResult } from "../../native/index.js";
import { planUnicast } from "../../nodes/multicast/baselines.js";
import { roleFor } from "../../nodes/multicast/role.js";
import { validatePlan } from "../../nodes/multicast/validate.js";
import { NOT_ABOUT_TIMING, localCluster, type LocalCluster } from "./harness.js";

const MiB = 1 << 20;

describe("paced sends (RoleSpec.paceBytesPerS, tcp)", () => {
  let cluster: LocalCluster | undefined;
  afterEach(() => {
    cluster?.close();
    cluster = undefined;
  });

  it("block i arrives no earlier than i blocks' bytes at the pace after the sender's loop began; every byte intact", async () => {
    // 8 blocks of 1 MiB at 16 MiB/s: block i may start at i × 62.5 ms; the last at 437.5 ms.
    const plan = validatePlan(planUnicast({ model: { totalBytes: 8 * MiB, blockCount: 8 }, source: "s", targets: ["t0"] }));
    cluster = localCluster(plan, 7, "tcp");
    const c = cluster;
    const addrs = Object.fromEntries(c.nodes.map((n) => [n, { host: "127.0.0.1", port: c.endpoints.get(n)!.port }]));
    const pace = 16 * MiB;
    const [sent, got] = await Promise.all(
      ["s", "t0"].map((n) => c.endpoints.get(n)!.run({ ...roleFor(plan, n, addrs, 4242, NOT_ABOUT_TIMING), ...(n === "s" ? { paceBytesPerS: pace } : {}) }, c.stores.get(n)!)),
    ) as [RunResult, RunResult];
    expect(c.stores.get("t0")!.verifyPattern(7)).toBe(-1);
    expect(got.arrivals.map((a) => a.block)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // CLOCK_MONOTONIC of this host: the sender's loop began at startMonoMs + dialMs (after its connect phase).
    const loopStart = sent.profile.startMonoMs + sent.profile.dialMs;
    for (const a of got.arrivals) expect(got.profile.startMonoMs + a.atMs).toBeGreaterThanOrEqual(loopStart + (a.block * MiB * 1000) / pace - 1);
    expect(sent.elapsedMs).toBeGreaterThanOrEqual((7 * MiB * 1000) / pace - 1);
  });

  it("a negative or fractional pace is a TypeError before anything runs", () => {
    const plan = validatePlan(planUnicast({ model: { totalBytes: MiB, blockCount: 1 }, source: "s", targets: ["t0"] }));
    cluster = localCluster(plan, 7, "tcp");
    const role = roleFor(plan, "s", { s: { host: "127.0.0.1", port: 1 }, t0: { host: "127.0.0.1", port: 2 } }, 1);
    const ep: Endpoint = cluster.endpoints.get("s")!;
    expect(() => ep.run({ ...role, paceBytesPerS: -1 }, cluster!.stores.get("s")!)).toThrow(TypeError);
    expect(() => ep.run({ ...role, paceBytesPerS: 1.5 }, cluster!.stores.get("s")!)).toThrow(TypeError);
    expect(ep.running).toBe(false);
  });
});
