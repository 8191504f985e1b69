import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { createRegistry } from "../../core/metrics.js";
import { makeUsage } from "../../core/openai.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, RegionLink, RegionTargets, RegionTelemetry, TargetsAck } from "../../core/ports.js";
import { submitOverStream } from "../../region/link/stream-callbacks.js";
import { MemoryHistory } from "../../forecasts/history.js";
import { NiwRecorder } from "../../forecasts/niw-recorder.js";
import { modelTelemetry } from "../../test/helpers/fake-link.js";
import { DirFileStore } from "../queue/dir-files.js";
import { EmbeddedQueueStore } from "../queue/embedded.js";
import { Dispatcher, type DispatcherOptions } from "./dispatcher.js";
import { encodePayload } from "./lines.js";
import { QueueMetrics } from "./dispatch-metrics.js";

/** A region whose every dispatch waits until the test releases or fails it. */
class GatedLink implements RegionLink {
  readonly sent: { req: GenerateRequest; release: () => void; fail: () => void }[] = [];
  private listener: ((t: RegionTelemetry) => void) | undefined;
  private seq = 0;
  constructor(readonly region: string) {}
  subscribe(fn: (t: RegionTelemetry) => void) {
    this.listener = fn;
    return () => (this.listener = undefined);
  }
  /**
   * A report at `utilization`; `interactiveTokensPerS` > 0 says the region also serves the model's interactive traffic;
   * `preemptible` (absent: engines that do not preempt) is the part of it batch work holds that the engines would preempt.
   */
  signal(utilization: number, interactiveTokensPerS = 0, waiting = 0, preemptible?: number): void {
    const m = modelTelemetry("m", utilization, 1);
    const p = preemptible === undefined ? {} : { preemptibleMemoryUtilization: preemptible };
    this.listener?.({ region: this.region, seq: ++this.seq, atMs: 0, models: [{ ...m, ...p, endpoints: m.endpoints.map((e) => ({ ...e, ...p })), tokensPerS: interactiveTokensPerS, waiting }] });
  }
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void {
    submitOverStream(this.dispatch(req, signal), () => 0, callbacks);
  }
  async *dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    let release!: () => void;
    let fail!: () => void;
    const gate = new Promise<void>((res, rej) => {
      release = res;
      fail = () => rej(new TidegateError("upstream_error", "region died"));
      signal?.addEventListener("abort", () => rej(new TidegateError("cancelled", "aborted")), { once: true });
    });
    this.sent.push({ req, release, fail });
    await gate;
    yield { type: "token", text: ` ${this.region}`, tokens: 1 };
    yield { type: "done", finishReason: "stop", usage: makeUsage(req.promptTokens, 1) };
  }
  async instances(): Promise<import("../../core/ports.js").RegionInstances> {
    return { region: this.region, actuator: "static", instances: [], nodes: [], failures: [], actions: [] };
  }

  async sendTargets(t: RegionTargets): Promise<TargetsAck> {
    return { region: this.region, decisionId: t.decisionId, accepted: true };
  }
  async close() {}
}

async function setup(n: number, opts: { leaseMs?: number; promoteAfterMs?: number; enqueuedAtMs?: number; onDispatched?: DispatcherOptions["onDispatched"]; allowedRegions?: string[]; pace?: boolean; paceGroup?: number; refill?: boolean; kvTokens?: number; fill?: DispatcherOptions["fill"]; instanceTokensPerS?: number; windowMs?: number; dedicatedAtRisk?: boolean } = {}) {
  const clock = new VirtualClock(opts.enqueuedAtMs ?? 0);
  const store = new EmbeddedQueueStore(null);
  const files = new DirFileStore(null);
  const links = [new GatedLink("a"), new GatedLink("b"), new GatedLink("c")];
  const registry = createRegistry(false);
  const metrics = new QueueMetrics(registry, ["m"], ["a", "b", "c"]);
  const d = new Dispatcher({
    store, files, clock, links, models: ["m"], thresholds: { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5 },
    promoteAfterMs: opts.promoteAfterMs ?? 36_000_000, leaseMs: opts.leaseMs ?? 60_000, maintenanceIntervalMs: 1000, metrics, resultLingerMs: 0,
    ...(opts.onDispatched === undefined ? {} : { onDispatched: opts.onDispatched }),
    ...(opts.pace === undefined ? {} : { pace: opts.pace }),
    ...(opts.refill === undefined ? {} : { refill: opts.refill }),
    ...(opts.paceGroup === undefined ? {} : { paceGroup: opts.paceGroup }),
    ...(opts.fill === undefined ? {} : { fill: opts.fill, kvCapacityTokens: () => opts.kvTokens ?? 100_000 }),
    ...(opts.instanceTokensPerS === undefined ? {} : { instanceTokensPerS: () => opts.instanceTokensPerS! }),
    ...(opts.dedicatedAtRisk === undefined ? {} : { dedicatedAtRisk: opts.dedicatedAtRisk }),
  });
  await store.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: clock.now(), expiresAtMs: clock.now() + (opts.windowMs ?? 86_400_000), ...(opts.allowedRegions === undefined ? {} : { allowedRegions: opts.allowedRegions }) });
  await store.stage("b", Array.from({ length: n }, (_, i) => ({ index: i, payload: encodePayload({ custom_id: `c${i}`, url: "/v1/completions", body: { model: "m", prompt: `p${i}`, max_tokens: 1 } }) })));
  await store.activate("b", "m", n, clock.now());
  d.start();
  const flush = async () => {
    for (let i = 0; i < 20; i++) await Promise.resolve();
    await clock.advanceBy(0);
  };
  return { clock, store, files, links, d, registry, flush };
}

describe("Dispatcher (SageServe §6.3)", () => {
  it("sends 2 per signal below 0.50, 1 below 0.60, none at or above 0.60", async () => {
    const { links, flush, d } = await setup(20);
    links[0]!.signal(0.45);
    links[1]!.signal(0.55);
    links[2]!.signal(0.6);
    await flush();
    expect(links.map((l) => l.sent.length)).toEqual([2, 1, 0]);
    links[2]!.signal(0.95);
    links[0]!.signal(0.2);
    await flush();
    expect(links.map((l) => l.sent.length)).toEqual([4, 1, 0]);
    expect(links[0]!.sent.map((s) => s.req.priority)).toEqual([1, 1, 1, 1]);
    expect(links[0]!.sent.map((s) => s.req.id)).toEqual(["b:000000", "b:000001", "b:000003", "b:000004"]);
    for (const l of links) for (const s of l.sent) s.release();
    await d.idle();
    await d.stop();
  });

  it("paced beside interactive traffic: a report's requests go out over the first half of the time since the last one; stop gives back what waits", async () => {
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 4 };
    const { links, flush, clock, d, store } = await setup(40, { pace: true, fill });
    const sent = () => links[0]!.sent.length;
    links[0]!.signal(0, 500); // the region's first report: no interval known yet, all 4 at once
    await flush();
    expect(sent()).toBe(4);
    await clock.advanceBy(400);
    links[0]!.signal(0, 500); // 400 ms since the last: 4 requests over 200 ms, 50 ms apart
    await flush();
    expect(sent()).toBe(5);
    for (const [after, total] of [[49, 5], [1, 6], [50, 7], [50, 8], [100, 8]] as const) {
      await clock.advanceBy(after);
      await flush();
      expect(sent()).toBe(total);
    }
    await clock.advanceBy(200);
    links[0]!.signal(0); // no interactive traffic: nobody to protect, all at once
    await flush();
    expect(sent()).toBe(12);
    await clock.advanceBy(400);
    links[0]!.signal(0, 500);
    await flush();
    expect(sent()).toBe(13); // three more wait; stop comes first
    for (const s of links[0]!.sent) s.release();
    await d.stop();
    expect(sent()).toBe(13);
    // Their leases were given back at stop: the next claim takes them at once.
    expect((await store.claim("m", 10, clock.now(), 1000)).map((c) => c.requestId)).toEqual(["b:000013", "b:000014", "b:000015"].concat(Array.from({ length: 7 }, (_, i) => `b:0000${16 + i}`)));
  });

  it("paced in groups: a report's requests go out a group at a time (one shared prefill each), the groups spread evenly", async () => {
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 7 };
    const { links, flush, clock, d } = await setup(40, { pace: true, paceGroup: 3, fill });
    const sent = () => links[0]!.sent.length;
    links[0]!.signal(0, 500);
    await flush();
    expect(sent()).toBe(7); // the first report: no interval known, all at once
    await clock.advanceBy(600);
    links[0]!.signal(0, 500); // 600 ms since the last: 7 requests in 3 groups (3, 3, 1) over 300 ms, 100 ms apart
    await flush();
    for (const [after, total] of [[0, 10], [99, 10], [1, 13], [99, 13], [1, 14], [500, 14]] as const) {
      await clock.advanceBy(after);
      await flush();
      expect(sent()).toBe(total);
    }
    for (const s of links[0]!.sent) s.release();
    await d.idle();
    await d.stop();
  });

  it("refills on an idle fleet: a served request is replaced at once in its region while no interactive traffic is there", async () => {
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 4 };
    const { links, flush, d } = await setup(40, { refill: true, fill });
    const [a, b] = [links[0]!, links[1]!];
    a.signal(0);
    await flush();
    expect(a.sent.length).toBe(4);
    a.sent[0]!.release();
    a.sent[1]!.release();
    await flush();
    expect(a.sent.length).toBe(6); // two done, two more, no report in between
    expect(b.sent.length).toBe(0); // to the region that freed them only
    a.sent[2]!.fail(); // a region failure frees nothing to refill: the lease returns that request
    await flush();
    expect(a.sent.length).toBe(6);
    a.signal(0.58); // over fillTo (no grant by free KV; §6.3's floor sends 1) but under dispatchOneBelow: refill goes on
    await flush();
    expect(a.sent.length).toBe(7);
    a.sent[3]!.release();
    await flush();
    expect(a.sent.length).toBe(8);
    a.signal(0.62); // at or over §6.3's threshold: no grant, and no refill either
    await flush();
    a.sent[4]!.release();
    await flush();
    expect(a.sent.length).toBe(8);
    a.signal(0.3, 0, 2); // the engines queue requests: no grant; a refill only keeps what runs running
    await flush();
    expect(a.sent.length).toBe(8);
    a.sent[5]!.release();
    await flush();
    expect(a.sent.length).toBe(9);
    a.signal(0, 500); // the model's interactive traffic beside: fillToBeside, and no refill
    await flush();
    const n = a.sent.length;
    a.sent[6]!.release();
    await flush();
    expect(a.sent.length).toBe(n);
    for (const l of links) for (const s of l.sent) s.release();
    await d.idle();
    await d.stop();
  });

  it("holds what it has sent to a region within the fill target's count: grants on stale reports and refills cannot add past it", async () => {
    // 20 KV tokens; each request 1 prompt + 1 max token: it holds 1.5 tokens over its life (2 reserved).
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 64 };
    const { links, flush, d } = await setup(40, { refill: true, fill, kvTokens: 20 });
    const a = links[0]!;
    a.signal(0); // no request seen yet: 512 tokens a request assumed, count 1
    await flush();
    expect(a.sent.length).toBe(1);
    a.signal(0); // floor(0.55 × 20 / 2) = 5 by free KV; count floor(0.55 × 20 / 1.5) = 7, 1 out: 5
    await flush();
    expect(a.sent.length).toBe(6);
    a.signal(0); // the report still says 0 (stale): 5 by free KV, but only 1 more fits the count
    await flush();
    expect(a.sent.length).toBe(7);
    a.signal(0);
    await flush();
    expect(a.sent.length).toBe(7);
    a.sent[0]!.release();
    a.sent[1]!.release();
    await flush();
    expect(a.sent.length).toBe(9); // refilled back to 7 out
    await d.stop(); // aborts what runs (releasing it would refill without end)
  });

  it("where the engines preempt batch: fills to fillToPreemptible and refills past 0.60 of KV while interactive + non-preemptible stays under it (issue 37)", async () => {
    // 100 KV tokens; each request 1 prompt + 1 max token (2 reserved, 1.5 held over its life).
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, fillToPreemptible: 0.9, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 64 };
    const { links, flush, d } = await setup(200, { refill: true, fill, kvTokens: 100 });
    const [a, b] = [links[0]!, links[1]!];
    a.signal(0, 0, 0, 0); // no request seen yet: 512 tokens a request assumed, count 1
    await flush();
    expect(a.sent.length).toBe(1);
    a.signal(0, 0, 0, 0); // floor(0.9 × 100 / 2) = 45 by free KV (fillTo would give 27); count floor(0.9 × 100 / 1.5) = 60, 1 out: 45
    await flush();
    expect(a.sent.length).toBe(46);
    // KV 0.85 in use, 0.80 of it preemptible batch: routing utilization 0.05 — the gate stays open, refill goes on.
    a.signal(0.85, 0, 0, 0.8); // floor((0.9 − 0.85) × 100 / 2) = 2
    await flush();
    expect(a.sent.length).toBe(48);
    a.sent[0]!.release();
    await flush();
    expect(a.sent.length).toBe(49);
    // The same 0.85 from engines that do not preempt closes the region to batch: no grant, no refill.
    b.signal(0, 0, 0);
    await flush();
    const nb = b.sent.length;
    expect(nb).toBeGreaterThan(0);
    b.signal(0.85, 0, 0);
    await flush();
    b.sent[0]!.release();
    await flush();
    expect(b.sent.length).toBe(nb);
    await d.stop();
  });

  it("a batch whose deadline spare capacity cannot meet is flagged within a minute of its creation: object view, metrics (issue 37)", async () => {
    // 40 requests of 1 prompt + 1 max token (2 tokens each, 1,024 assumed before any is sent) in a 60 s window; the
    // one region reports 0.98 of its KV in interactive use: 1 instance × 100 tokens/s × 0.02 = 2 tokens/s spare.
    const { clock, links, flush, d, registry } = await setup(40, { instanceTokensPerS: 100, windowMs: 60_000 });
    links[0]!.signal(0.98);
    await flush();
    for (let t = 0; t < 60_000 && d.capacityView("b")?.deadline_at_risk !== true; t += 1000) await clock.advanceBy(1000);
    expect(clock.now()).toBeLessThan(60_000);
    expect(d.capacityView("b")).toMatchObject({ deadline_at_risk: true, spare_tokens_per_s: 2 });
    expect(await registry.metrics()).toMatch(/^tidegate_queue_batches_at_risk\{model="m"\} 1$/m);
    for (const l of links) for (const s of l.sent) s.release();
    await d.stop();
  });

  for (const dedicatedAtRisk of [true, false]) {
    it(`a flagged batch ${dedicatedAtRisk ? "is granted dedicated capacity (priority 0) with queue.dedicatedAtRisk" : "stays on spare capacity without queue.dedicatedAtRisk"}; its tokens by capacity are in the store, so a restarted dispatcher loses none (issue 37)`, async () => {
      // Region a at 0.5: 1 instance × 1 token/s × 0.5 = 0.5 tokens/s spare; 40 requests of about 2 tokens (prompt +
      // max_tokens) in 60 s need more: flagged by the first maintenance pass. The first report's requests went out before it.
      const { clock, store, links, flush, d } = await setup(40, { instanceTokensPerS: 1, windowMs: 60_000, dedicatedAtRisk });
      const a = links[0]!;
      a.signal(0.5);
      await flush();
      const first = a.sent.length;
      expect(first).toBeGreaterThan(0);
      expect(a.sent.map((s) => s.req.priority)).toEqual(Array.from({ length: first }, () => 1));
      await clock.advanceBy(1000);
      expect(d.capacityView("b")).toMatchObject({ deadline_at_risk: true });
      a.signal(0.5);
      await flush();
      const later = a.sent.slice(first);
      expect(later.length).toBeGreaterThan(0);
      expect(later.map((s) => s.req.priority)).toEqual(later.map(() => (dedicatedAtRisk ? 0 : 1)));
      for (const s of a.sent) s.release();
      await d.idle();
      // Each served request has 1 output token; the counts are in the batch's record, not in this dispatcher.
      await d.stop();
      const served = a.sent.length;
      expect(await store.getBatch("b")).toMatchObject({ completed: served, spareTokens: dedicatedAtRisk ? first : served, dedicatedTokens: dedicatedAtRisk ? served - first : 0 });
    });
  }

  it("a batch that spare capacity can finish in time is not flagged", async () => {
    const { clock, links, flush, d } = await setup(40, { instanceTokensPerS: 100_000, windowMs: 3_600_000 });
    links[0]!.signal(0.98);
    await flush();
    await clock.advanceBy(5000);
    expect(d.capacityView("b")).toMatchObject({ deadline_at_risk: false });
    for (const l of links) for (const s of l.sent) s.release();
    await d.stop();
  });

  it("does not refill without the option (each report decides alone)", async () => {
    const fill = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5, fillTo: 0.55, fillToBeside: 0.15, reopenBelow: 0.45, reopenReports: 3, maxPerReport: 4 };
    const { links, flush, d } = await setup(40, { fill });
    links[0]!.signal(0);
    await flush();
    for (const s of links[0]!.sent) s.release();
    await flush();
    expect(links[0]!.sent.length).toBe(4);
    await d.idle();
    await d.stop();
  });

  it("records what it sends as batch demand per (model, region) and minute for the planner's NIW buffer", async () => {
    const history = new MemoryHistory();
    let rec: NiwRecorder | undefined;
    const { links, flush, d, clock } = await setup(3, { onDispatched: (m, r, tokens, at) => rec!.record(m, r, tokens, at) });
    rec = new NiwRecorder(history, ["m"], ["a", "b", "c"], clock);
    links[0]!.signal(0.45); // two requests to a
    links[1]!.signal(0.55); // one to b
    await flush();
    for (const l of links) for (const s of l.sent) s.release();
    await d.idle();
    await d.stop();
    await clock.advanceBy(60_000);
    await rec.stop();
    // "p0" is 1 prompt token (the tokenizer's estimate) + max_tokens 1 = 2 tokens per request.
    const perRequest = links[0]!.sent[0]!.req.promptTokens + 1;
    expect(await history.series({ kind: "niw", model: "m", region: "a" }, 0, 60_000)).toEqual([(2 * perRequest) / 60]);
    expect(await history.series({ kind: "niw", model: "m", region: "b" }, 0, 60_000)).toEqual([perRequest / 60]);
    expect(await history.series({ kind: "niw", model: "m", region: "c" }, 0, 60_000)).toEqual([0]);
  });

  it("sends requests older than promoteAfterMs with priority 0", async () => {
    const { links, flush, clock, d } = await setup(2, { promoteAfterMs: 10_000, leaseMs: 1_000_000 });
    await clock.advanceBy(10_000);
    links[0]!.signal(0.1);
    await flush();
    expect(links[0]!.sent.map((s) => s.req.priority)).toEqual([0, 0]);
    for (const s of links[0]!.sent) s.release();
    await d.idle();
    await d.stop();
  });

  it("a region that dies keeps the lease; the request returns when it runs out and finishes elsewhere, once", async () => {
    const { links, flush, clock, store, d, registry } = await setup(1, { leaseMs: 5000 });
    links[0]!.signal(0.55);
    await flush();
    links[0]!.sent[0]!.fail();
    await flush();
    links[1]!.signal(0.1);
    await flush();
    expect(links[1]!.sent).toHaveLength(0); // still leased to the dead region
    await clock.advanceBy(5001);
    await d.maintain();
    links[1]!.signal(0.1);
    await flush();
    expect(links[1]!.sent.map((s) => s.req.id)).toEqual(["b:000000"]);
    links[1]!.sent[0]!.release();
    await d.idle();
    await d.maintain();
    const b = await store.getBatch("b");
    expect(b).toMatchObject({ status: "completed", completed: 1, failed: 0 });
    expect(await registry.metrics()).toMatch(/tidegate_queue_lease_expiries_total 1/);
    await d.stop();
  });

  it("a request that runs longer than its lease keeps it (renewed by maintenance) and is sent once", async () => {
    const { links, flush, clock, store, d, registry } = await setup(1, { leaseMs: 5000 });
    links[0]!.signal(0.55);
    await flush();
    expect(links[0]!.sent).toHaveLength(1);
    // Four leases long, with maintenance every second as start() runs it and region a reporting (full, so it takes
    // nothing more): never requeued, never sent elsewhere.
    for (let t = 0; t < 20; t++) {
      await clock.advanceBy(1000);
      links[0]!.signal(0.9);
      await flush();
      links[1]!.signal(0.1);
      await flush();
    }
    expect(links[1]!.sent).toHaveLength(0);
    expect(await store.getBatch("b")).toMatchObject({ leased: 1 });
    links[0]!.sent[0]!.release();
    await d.idle();
    await d.maintain();
    expect(await store.getBatch("b")).toMatchObject({ status: "completed", completed: 1, leased: 0 });
    expect(await registry.metrics()).toMatch(/tidegate_queue_lease_expiries_total 0/);
    await d.stop();
  });

  it("a region that stops reporting (hung) gets no lease renewals: its request returns and runs elsewhere", async () => {
    const { links, flush, clock, d, registry } = await setup(1, { leaseMs: 5000 });
    links[0]!.signal(0.55);
    await flush();
    expect(links[0]!.sent).toHaveLength(1);
    for (let t = 0; t < 8; t++) {
      await clock.advanceBy(1000);
      await flush();
      links[1]!.signal(0.1);
      await flush();
    }
    expect(links[1]!.sent.map((s) => s.req.id)).toEqual(["b:000000"]);
    expect(await registry.metrics()).toMatch(/tidegate_queue_lease_expiries_total 1/);
    links[1]!.sent[0]!.release();
    links[0]!.sent[0]!.fail();
    await d.stop();
  });

  it("a clean stop gives the leases of aborted requests back at once", async () => {
    const { links, flush, store, d } = await setup(3, { leaseMs: 1_000_000 });
    links[0]!.signal(0.1);
    await flush();
    expect(links[0]!.sent).toHaveLength(2);
    expect(await store.getBatch("b")).toMatchObject({ leased: 2 });
    await d.stop();
    expect(await store.getBatch("b")).toMatchObject({ leased: 0, status: "in_progress" });
    expect((await store.claim("m", 5, 0, 1000)).map((r) => r.index)).toEqual([0, 1, 2]);
  });

  it("a request that ran twice (slow region, lease expired) gets exactly one result", async () => {
    const { links, flush, clock, store, files, d, registry } = await setup(1, { leaseMs: 5000 });
    // Renewals lost (the router cut off from the queue for a while): the lease runs out while the region still works.
    store.renew = async () => 0;
    links[0]!.signal(0.55);
    await flush();
    await clock.advanceBy(5001);
    await d.maintain();
    links[1]!.signal(0.55);
    await flush();
    expect(links[1]!.sent).toHaveLength(1);
    links[1]!.sent[0]!.release();
    await flush();
    await flush();
    expect(await store.getBatch("b")).toMatchObject({ completed: 1 });
    links[0]!.sent[0]!.release();
    await d.idle();
    await d.maintain();
    const b = (await store.getBatch("b"))!;
    expect(b).toMatchObject({ status: "completed", completed: 1 });
    const out = (await files.content(b.outputFileId!))!.toString().trim().split("\n");
    expect(out).toHaveLength(1);
    expect(JSON.parse(out[0]!).response.body.choices[0].text).toBe(" b");
    const m = await registry.metrics();
    expect(m).toMatch(/tidegate_queue_results_total\{outcome="ok"\} 1/);
    expect(m).toMatch(/tidegate_queue_results_total\{outcome="dropped"\} 1/);
    expect(m).toMatch(/tidegate_queue_dispatched_total\{model="m",region="a",priority="1"\} 1/);
    await d.stop();
  });

  it("a batch kept within regions is sent only there: claimed by another region's report it waits for one that allows it", async () => {
    const { links, flush, d, store, clock } = await setup(4, { allowedRegions: ["c"], leaseMs: 60_000 });
    links[0]!.signal(0.45); // a claims 2 of c's requests: parked, not sent
    await flush();
    expect(links[0]!.sent).toHaveLength(0);
    expect((await store.getBatch("b"))!.leased).toBe(2);
    links[2]!.signal(0.45); // c takes the 2 parked first, claiming nothing more
    await flush();
    expect(links[2]!.sent.map((x) => x.req.id)).toEqual(["b:000000", "b:000001"]);
    expect((await store.getBatch("b"))!.leased).toBe(2);
    for (const x of links[2]!.sent) x.release();
    await flush();
    expect((await store.getBatch("b"))!.completed).toBe(2);
    // Parked past half the lease: released to the queue (not held until the lease runs out).
    links[1]!.signal(0.45);
    await flush();
    expect((await store.getBatch("b"))!.leased).toBe(2);
    await clock.advanceBy(31_000);
    await flush();
    expect((await store.getBatch("b"))!.leased).toBe(0);
    expect(links[0]!.sent.length + links[1]!.sent.length).toBe(0);
    await d.stop();
  });
});

describe("Dispatcher lease owners (issue 32 item 4)", () => {
  const TTL = 5000;

  async function twoDispatchers(n: number) {
    const store = new EmbeddedQueueStore(null);
    const files = new DirFileStore(null);
    // Each dispatcher has its own clock: the one that "crashes" simply stops being advanced (no heartbeat, no timers).
    const clocks = [new VirtualClock(0), new VirtualClock(0)];
    const links = [[new GatedLink("a")], [new GatedLink("a")]];
    const registries = [createRegistry(false), createRegistry(false)];
    const ds = [0, 1].map((i) => new Dispatcher({
      store, files, clock: clocks[i]!, links: links[i]!, models: ["m"], thresholds: { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5 },
      promoteAfterMs: 36_000_000, leaseMs: 120_000, ownerTtlMs: TTL, maintenanceIntervalMs: 1000, resultLingerMs: 0,
      metrics: new QueueMetrics(registries[i]!, ["m"], ["a"]),
    }));
    await store.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 86_400_000 });
    await store.stage("b", Array.from({ length: n }, (_, i) => ({ index: i, payload: encodePayload({ custom_id: `c${i}`, url: "/v1/completions", body: { model: "m", prompt: `p${i}`, max_tokens: 1 } }) })));
    await store.activate("b", "m", n, 0);
    const flush = async () => {
      for (let i = 0; i < 20; i++) await Promise.resolve();
    };
    return { store, files, clocks, links, registries, ds, flush };
  }

  it("a dispatcher that dies has its leases taken back by another within ownerTtlMs (not leaseMs), and its late results are dropped", async () => {
    const { store, files, clocks, links, registries, ds, flush } = await twoDispatchers(2);
    ds[0]!.start();
    await flush();
    links[0]![0]!.signal(0.45); // the first dispatcher leases both requests, then "dies" (its clock never moves again)
    await flush();
    expect(links[0]![0]!.sent).toHaveLength(2);
    ds[1]!.start();
    await flush();
    expect(ds[1]!.leaseOwner).toBeGreaterThan(ds[0]!.leaseOwner!);
    // Nothing is waiting, so the second one gets nothing until the first's heartbeat (opened at 0, TTL 5 s) runs out.
    for (let t = 1000; t <= TTL; t += 1000) {
      await clocks[1]!.advanceTo(t);
      links[1]![0]!.signal(0.1);
      await flush();
      expect(links[1]![0]!.sent).toHaveLength(0);
    }
    await clocks[1]!.advanceTo(TTL + 1000); // the maintenance pass after the TTL takes both back
    links[1]![0]!.signal(0.1);
    await flush();
    expect(links[1]![0]!.sent.map((s) => s.req.id)).toEqual(["b:000000", "b:000001"]);
    expect(await registries[1]!.metrics()).toMatch(/tidegate_queue_leases_reclaimed_total 2/);
    expect(await registries[1]!.metrics()).toMatch(/tidegate_queue_lease_expiries_total 0/);
    // The dead one's region answers late: its results are fenced (dropped), the live one's are written.
    for (const s of links[0]![0]!.sent) s.release();
    await ds[0]!.idle();
    expect(await store.getBatch("b")).toMatchObject({ completed: 0, leased: 2 });
    expect(await registries[0]!.metrics()).toMatch(/tidegate_queue_results_total\{outcome="dropped"\} 2/);
    for (const s of links[1]![0]!.sent) s.release();
    await ds[1]!.idle();
    await ds[1]!.maintain();
    const b = (await store.getBatch("b"))!;
    expect(b).toMatchObject({ status: "completed", completed: 2 });
    const out = (await files.content(b.outputFileId!))!.toString().trim().split("\n").map((l) => JSON.parse(l) as { custom_id: string });
    expect(out.map((l) => l.custom_id)).toEqual(["c0", "c1"]);
    await ds[1]!.stop();
  });

  it("a dispatcher whose own owner was declared dead (paused past the TTL) aborts what it runs under it and carries on as a new owner", async () => {
    const { store, clocks, links, registries, ds, flush } = await twoDispatchers(4);
    const d = ds[0]!;
    d.start();
    await flush();
    const first = d.leaseOwner!;
    links[0]![0]!.signal(0.45);
    await flush();
    expect(links[0]![0]!.sent).toHaveLength(2);
    // Another replica found it dead while it was paused (its heartbeat had run out).
    expect(await store.reclaimDead(TTL + 1)).toMatchObject({ owners: 1, leases: 2 });
    await clocks[0]!.advanceTo(1000); // its next heartbeat learns it was fenced
    await flush();
    expect(d.leaseOwner).toBeGreaterThan(first);
    expect(await registries[0]!.metrics()).toMatch(/tidegate_queue_owner_fenced_total 1/);
    // What it ran under the old owner was aborted: nothing is written from it, and the requests are claimable again.
    await d.idle();
    expect(await store.getBatch("b")).toMatchObject({ completed: 0, leased: 0 });
    links[0]![0]!.signal(0.45);
    await flush();
    expect(links[0]![0]!.sent.slice(2).map((s) => s.req.id)).toEqual(["b:000000", "b:000001"]);
    for (const s of links[0]![0]!.sent.slice(2)) s.release();
    await d.idle();
    expect(await store.getBatch("b")).toMatchObject({ completed: 2 });
    await d.stop();
  });
});
