/**
 * The Transport conformance suite: the same behaviour asked of every transport (tcp here; verbs where a device
 * exists). Blocks arrive intact and verified, forwarding is pipelined, every failure names its peer.
 */
import { afterEach, describe, expect, it } from "vitest";
import { BlockStore, Endpoint, isDataPlaneError, type RunResult, type TransportPreference } from "../../native/index.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import { planBinaryTree, planUnicast } from "../../nodes/multicast/baselines.js";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import { roleFor } from "../../nodes/multicast/role.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { validatePlan } from "../../nodes/multicast/validate.js";
import { NOT_ABOUT_TIMING, localCluster, runAll, type LocalCluster } from "./harness.js";

const MiB = 1 << 20;
let runIds = 1000;

/** Registers the suite for `transport`: every plan shape delivers exact bytes; corruption, stalls, unreachable peers and cancellation fail as specified. */
export function transportConformance(transport: TransportPreference): void {
  describe(`transport conformance: ${transport}`, () => {
    let cluster: LocalCluster | undefined;
    afterEach(() => {
      cluster?.close();
      cluster = undefined;
    });

    const targets = (n: number) => [...Array(n).keys()].map((i) => `t${i}`);
    const plans: [string, () => MulticastPlan][] = [
      ["chain", () => planChains({ model: { totalBytes: 8 * MiB + 12, blockCount: 16 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: targets(3).map((id) => ({ id, inBytesPerS: 1 })) })],
      ["binomial 1→8", () => planBinomial({ model: { totalBytes: 8 * MiB, blockCount: 16 }, sources: ["s"], targets: targets(7) })],
      ["binomial 2→6 (k-way)", () => planBinomial({ model: { totalBytes: 4 * MiB, blockCount: 8 }, sources: ["s", "s2"], targets: targets(4) })],
      ["binary tree", () => planBinaryTree({ model: { totalBytes: 4 * MiB, blockCount: 8 }, source: "s", targets: targets(5) })],
      ["unicast", () => planUnicast({ model: { totalBytes: 4 * MiB, blockCount: 4 }, source: "s", targets: targets(3) })],
    ];
    for (const [name, make] of plans) {
      it(`${name}: every target ends with every byte of the model, each block verified once`, async () => {
        const plan = validatePlan(make());
        cluster = localCluster(plan, 42, transport);
        const res = await runAll(cluster, plan, runIds++, NOT_ABOUT_TIMING);
        for (const t of plan.targets) {
          const r = res.get(t);
          if (r instanceof Error) throw r;
          expect(cluster.stores.get(t)!.verifyPattern(42), t).toBe(-1);
          expect(r!.arrivals.map((a) => a.block).sort((x, y) => x - y)).toEqual([...Array(plan.blockCount).keys()]);
          expect(r!.bytesReceived).toBe(plan.totalBytes);
        }
        const sent = [...res.values()].reduce((a, r) => a + (r as RunResult).bytesSent, 0);
        expect(sent).toBe(plan.transfers.reduce((a, t) => a + cluster!.stores.get("s")!.readBlock(t.block).length, 0));
      });
    }

    it("chain forwarding is pipelined: the tail's first block arrives long before the head has the last", async () => {
      const plan = planChains({ model: { totalBytes: 32 * MiB, blockCount: 16 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a", "b"].map((id) => ({ id, inBytesPerS: 1 })) });
      cluster = localCluster(plan, 7, transport);
      const res = await runAll(cluster, plan, runIds++, NOT_ABOUT_TIMING);
      const head = res.get("a") as RunResult;
      const tail = res.get("b") as RunResult;
      const headLast = Math.max(...head.arrivals.map((a) => a.atMs));
      const tailFirst = Math.min(...tail.arrivals.map((a) => a.atMs));
      expect(tailFirst).toBeLessThan(headLast);
    });

    it("a corrupted block is rejected by the receiver, naming the block and the sender", async () => {
      const plan = planChains({ model: { totalBytes: 4 * MiB, blockCount: 8 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a", "b"].map((id) => ({ id, inBytesPerS: 1 })) });
      cluster = localCluster(plan, 9, transport);
      cluster.stores.get("s")!.corruptBlock(5);
      const res = await runAll(cluster, plan, runIds++, NOT_ABOUT_TIMING);
      const err = res.get("a");
      expect(isDataPlaneError(err, "checksum_mismatch"), String(err)).toBe(true);
      expect(err).toMatchObject({ peer: "s", block: 5 });
      expect((err as Error).message).toMatch(/block 5 from peer s \(127\.0\.0\.1:\d+\): checksum mismatch/);
      expect(cluster.stores.get("a")!.has(4)).toBe(true);
      expect(cluster.stores.get("a")!.has(5)).toBe(false);
      expect(isDataPlaneError(res.get("b"))).toBe(true);
    });

    it("a stalled peer fails the transfer within about 1 s, naming it", async () => {
      const plan = planChains({ model: { totalBytes: 2 * MiB, blockCount: 4 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a"].map((id) => ({ id, inBytesPerS: 1 })) });
      cluster = localCluster(plan, 3, transport);
      const silent = Endpoint.open({ host: "127.0.0.1", transport, log: () => undefined });
      try {
        // "s" is an endpoint that listens (the kernel accepts a's dial) but never runs its role: it never speaks.
        const addrs = { s: { host: "127.0.0.1", port: silent.port }, a: { host: "127.0.0.1", port: cluster.endpoints.get("a")!.port } };
        const reverse: MulticastPlan = { ...plan, sources: ["a"], targets: ["s"], transfers: plan.transfers.map((t) => ({ ...t, from: "a", to: "s" })) };
        cluster.stores.get("a")!.fillPattern(3);
        const t0 = performance.now();
        // This machine's own lateness, measured beside the run: a 1 s timer started with it. On a busy machine (or
        // the VM's emulated CPUs) both the transport's thread and this one are scheduled late; the promise is "about
        // 1 s of silence", so the bound is 1.6 s plus however late a 1 s timer fired here meanwhile.
        const timerLateMs = new Promise<number>((r) => setTimeout(() => r(performance.now() - t0 - 1000), 1000));
        const err = await cluster.endpoints.get("a")!.run(roleFor(reverse, "a", addrs, runIds++), cluster.stores.get("a")!).then(
          () => new Error("expected a failure"),
          (e: unknown) => e as Error,
        );
        const ms = performance.now() - t0;
        const late = await timerLateMs;
        expect(isDataPlaneError(err, "peer_stalled"), String(err)).toBe(true);
        expect(err.message).toMatch(/peer s \(127\.0\.0\.1:\d+\) stalled: nothing heard for \d+ ms/);
        expect(ms, `a 1 s timer fired ${late.toFixed(0)} ms late meanwhile`).toBeLessThan(1600 + late);
        expect(ms).toBeGreaterThan(900);
      } finally {
        silent.close();
      }
    });

    it("an unreachable peer fails before any byte moves", async () => {
      const plan = planUnicast({ model: { totalBytes: MiB, blockCount: 2 }, source: "s", targets: ["a"] });
      const store = BlockStore.forModel(MiB, 2);
      store.fillPattern(1);
      const ep = Endpoint.open({ host: "127.0.0.1", transport, log: () => undefined });
      const closed = Endpoint.open({ host: "127.0.0.1", transport, log: () => undefined });
      const deadPort = closed.port;
      closed.close();
      try {
        const role = roleFor(plan, "s", { s: { host: "127.0.0.1", port: ep.port }, a: { host: "127.0.0.1", port: deadPort } }, runIds++, { connectMs: 300 });
        const err = await ep.run(role, store).catch((e: unknown) => e as Error);
        expect(isDataPlaneError(err, "peer_unreachable"), String(err)).toBe(true);
        expect((err as Error).message).toMatch(new RegExp(`peer a \\(127\\.0\\.0\\.1:${deadPort}\\) is unreachable: Connection refused .*before any block was sent`));
      } finally {
        ep.close();
        store.close();
      }
    });

    it("cancellation ends every role with reason cancelled (abort signal) or a peer failure naming the canceller", async () => {
      const plan = planChains({ model: { totalBytes: 64 * MiB, blockCount: 64 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a", "b"].map((id) => ({ id, inBytesPerS: 1 })) });
      cluster = localCluster(plan, 5, transport);
      const addrs = Object.fromEntries(cluster.nodes.map((n) => [n, { host: "127.0.0.1", port: cluster!.endpoints.get(n)!.port }]));
      const ac = new AbortController();
      const runId = runIds++;
      // The abort reaches a's run from its onBlock callback on the JS thread. On a loaded machine that thread can be
      // late enough for the whole 64 MiB to cross loopback first (s then finishes, and the check reads a success);
      // over TCP the source is paced to 64 MiB/s (about a second), so the cancellation lands mid-transfer.
      const pace = (n: string) => (transport === "tcp" && n === "s" ? { paceBytesPerS: 64 * MiB } : {});
      const runs = cluster.nodes.map((n) =>
        cluster!.endpoints.get(n)!.run({ ...roleFor(plan, n, addrs, runId, NOT_ABOUT_TIMING), ...pace(n) }, cluster!.stores.get(n)!, n === "a" ? { signal: ac.signal, onBlock: () => ac.abort() } : {}).catch((e: unknown) => e as Error),
      );
      const [s, a, b] = await Promise.all(runs);
      expect(isDataPlaneError(a, "cancelled"), String(a)).toBe(true);
      for (const other of [s, b]) {
        expect(isDataPlaneError(other, "peer_failed") || isDataPlaneError(other, "peer_stalled"), String(other)).toBe(true);
        expect((other as Error).message).toMatch(/peer a/);
      }
    });
  });
}
