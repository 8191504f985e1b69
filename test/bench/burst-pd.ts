/**
 * bench:burst's disaggregated setting (issue 48; BlitzScale §6: "prefill and decode disaggregation, with prefill and
 * decode instances scaled independently based on their loads"). Two measurements:
 *
 * (a) Live decode scale-out (BlitzScale §5.2). One region of the `sim` actuator in virtual time, llama3.1-8b on
 *     2 × H100 as a prefill pool (2 instances, at least 2) and a decode pool (1), at most 8 each, each scaled by
 *     reactive-hpa (bench:burst's BURST_HPA) on its own load (region/runtime/pool-signals.ts), parameters over the
 *     network (BlitzScale Table 1, cluster A: `network` loading, no provisioning delay, as every bench:burst
 *     configuration). The Azure conversation trace compressed ×4 as bench:burst replays it, its first 10 minutes; every
 *     request is split (routing.pdMinPrefillTokens 0) and goes through the region gateway. Measured per decode
 *     scale-out: from the controller's decision to the first decode step booked on its instance — with
 *     `controller.pdSwitch` (the default: a serving prefill instance switched to decode where the prefill pool keeps
 *     another) and without (every one a decode instance loaded over the network). Judged: the median switch against
 *     the median load of the run without; target ≥ 3× sooner.
 *
 * (b) Parameter multicast beside KV traffic (BlitzScale §5.1, Figure 8). Two prefill nodes and a decode node serve;
 *     prompts' KV flows prefill → decode (Poisson arrivals, each the prompt's KV bytes by the model's shape) while the
 *     model's parameters are multicast to two new decode nodes from the pool's copies on a prefill node and on the
 *     decode node. The plan is region/pool/transfer.ts `planTransfer`, told which nodes send KV (`nodeLinks` with
 *     `sendsKv`, as the agents actuator tells it): the interference-avoiding plan leaves the prefill node's outbound
 *     link out (Algorithm 1 line 2); the plan that ignores KV links (no `sendsKv`) is printed beside it. Each node's
 *     outbound link (100 Gbps per GPU × 2, Table 1's RDMA) is shared equally by the flows on it at each instant
 *     (processor sharing); a chain hop sends the whole model on its sender's link. Measured: p99 time of the KV
 *     transfers that start while the model crosses one link, over their p99 with no multicast. Target: ≤ 1.2× with the interference-avoiding plan.
 */
import { VirtualClock } from "../../core/clock.js";
import { mergeOverDefault, parseConfig } from "../../core/config.js";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import { SAGESERVE_DELAYS } from "../../region/actuator/sim.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import { TABLE1_CLUSTER_A } from "../../region/liveload/sources.js";
import { DEFAULT_MULTICAST, nodeLinks, planTransfer } from "../../region/pool/transfer.js";
import { startSimRegion } from "../../region/runtime/sim-region.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { BURST_HPA, GPU } from "../../sim/replay/loading.js";
import type { Trace } from "../../sim/replay/traces.js";
import { advanceYielding } from "../helpers/streams.js";
import { quantile } from "./sse-load.js";

const MODEL = "llama3.1-8b";
const TP = 2;
const REGION = "pd";
/** The part of the compressed conversation trace replayed (virtual ms): its first bursts. */
const WINDOW_MS = 10 * 60_000;


export interface DecodeScaleOuts {
  /** Decode pool scale-outs by how they were made ("switch", or a step that loads: "reclaim", "redeploy", "provision"). */
  byKind: Record<string, number>;
  /** Median time from a decode scale-out's decision to the first decode step booked on its instance (ms, virtual), per kind. */
  medianToFirstDecodeMs: Record<string, number>;
  /** The median over the switches, and over the scale-outs that loaded (NaN where none). */
  switchMedianMs: number;
  loadMedianMs: number;
  /** The trace's requests replayed, and those that failed. */
  requests: number;
  failed: number;
}

/**
 * (a): the compressed Azure conversation trace's first `windowMs` through the region, `pdSwitch` on or off. Every
 * decode scale-out is timed from the controller's decision to the first decode step booked on its instance.
 */
export async function decodeScaleOuts(trace: Trace, pdSwitch: boolean, windowMs = WINDOW_MS): Promise<DecodeScaleOuts> {
  const clock = new VirtualClock();
  const ep = { model: MODEL, gpu: GPU, minInstances: 1, maxInstances: 8 };
  const config = parseConfig(mergeOverDefault({
    models: [{ name: MODEL, gpusPerInstance: { [GPU]: TP } }],
    regions: [{ name: REGION, utcOffsetH: 0, proximity: [REGION], gpus: [{ type: GPU, count: TP * 16 }], endpoints: [{ ...ep, role: "prefill", instances: 2, minInstances: 2 }, { ...ep, role: "decode", instances: 1 }] }],
    controller: { strategy: "reactive-hpa", actuator: "sim", pdSwitch },
    routing: { pdMinPrefillTokens: 0 },
  }));
  // Each decode scale-out's decision, by instance, until its first decode step.
  const pending = new Map<string, ControllerAction>();
  const took = new Map<string, number[]>();
  const region = startSimRegion({
    config,
    region: REGION,
    clock,
    // bench:burst's: no provisioning delay; a load takes what the network source says.
    delays: { ...SAGESERVE_DELAYS, spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 },
    weightsInRegion: [MODEL],
    random: () => 0.5,
    events: "coalesced",
    statsRefreshMs: 0,
    loading: { source: "network", bandwidths: TABLE1_CLUSTER_A },
    strategy: resolveStrategy("reactive-hpa", BURST_HPA),
    onAction: (a) => {
      if (a.role === "decode" && a.kind !== "drain" && !a.reason.startsWith("initial")) pending.set(a.instanceId, a);
    },
    // A booking on a new decode instance that is not a prefill for a remote decode is a decode step (pd.ts books the
    // decode step with the request as it came; every request is split).
    onRouted: (req: GenerateRequest, id: string) => {
      const a = pending.get(id);
      if (a === undefined || (req.kvTransfer !== undefined && "remoteDecode" in req.kvTransfer)) return;
      pending.delete(id);
      const list = took.get(a.kind) ?? took.set(a.kind, []).get(a.kind)!;
      list.push(clock.now() - a.atMs);
    },
  });
  let failed = 0;
  let requests = 0;
  try {
    for (const [i, r] of trace.requests.entries()) {
      if (r.arrivalMs > windowMs) break;
      await advanceYielding(clock, r.arrivalMs);
      requests++;
      const req: GenerateRequest = { id: `r${i}`, model: MODEL, kind: "chat", promptTokens: r.promptTokens, maxTokens: r.outputTokens, priority: 0, body: {}, blockHashes: [] };
      try {
        if (region.gateway.submit(req, { onFirstToken: () => {}, onDone: () => {}, onError: () => void failed++ }) === undefined) failed++;
      } catch {
        failed++;
      }
    }
    // The last scale-outs' first decodes: a minute more of the clock.
    await advanceYielding(clock, clock.now() + 60_000);
  } finally {
    await region.close();
  }
  const byKind: Record<string, number> = {};
  const medianToFirstDecodeMs: Record<string, number> = {};
  for (const [kind, list] of took) {
    byKind[kind] = list.length;
    medianToFirstDecodeMs[kind] = quantile(list, 0.5);
  }
  const loads = [...took].filter(([kind]) => kind !== "switch").flatMap(([, list]) => list);
  const median = (xs: readonly number[]) => (xs.length === 0 ? Number.NaN : quantile(xs, 0.5));
  return { byKind, medianToFirstDecodeMs, switchMedianMs: median(took.get("switch") ?? []), loadMedianMs: median(loads), requests, failed };
}

export interface KvInterference {
  /** The sources each plan's chains start from. */
  sources: string[];
  p99Ms: number;
  ratio: number;
}

/** (b): p99 KV transfer time during a multicast, with and without KV-aware source pruning, over no multicast. */
export function kvInterference(): { baselineP99Ms: number; avoiding: KvInterference; ignoring: KvInterference; kvBytes: number; linkBytesPerS: number; multicastBytes: number } {
  const link = (TABLE1_CLUSTER_A.rdmaBitsPerS / 8) * TP; // bytes/s per node, out (and in)
  const spec = MODEL_SPECS[MODEL]!;
  const kvBytes = 1155 * kvBytesPerToken(spec); // the Azure conversation trace's mean prompt
  const params = { model: MODEL, totalBytes: spec.params * 2, blockCount: spec.layers };
  const prefills = ["p0", "p1"];
  const policy = { ...DEFAULT_MULTICAST, linkBytesPerS: link }; // auto: chains for 2 targets, as live
  const sendsKv = (n: string) => prefills.includes(n);
  const planned = (aware: boolean) => planTransfer(params, ["p0", "d0"], ["t0", "t1"], policy, (n) => nodeLinks(aware ? { policy, sendsKv } : { policy }, n));
  // KV flows: Poisson at 40 transfers/s from each prefill node (seeded), to d0, while a hop of the multicast runs
  // (the whole model over one link: the window every plan's first hop spends sending).
  const windowMs = (params.totalBytes / link) * 1000;
  const flows: { sender: string; startMs: number }[] = [];
  let seed = 42;
  const rnd = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  for (const p of prefills) for (let t = -Math.log(1 - rnd()) * 25; t < windowMs; t += -Math.log(1 - rnd()) * 25) flows.push({ sender: p, startMs: t });
  const run = (multicastSenders: readonly string[]) => {
    // Multicast: each chain hop's sender sends the whole model on its outbound link from time 0.
    const all = [...flows.map((f) => ({ ...f, bytes: kvBytes, kv: true })), ...multicastSenders.map((s) => ({ sender: s, startMs: 0, bytes: params.totalBytes, kv: false }))];
    return processorSharing(all, link).filter((f) => f.kv).map((f) => f.doneMs - f.startMs);
  };
  const baseline = quantile(run([]), 0.99);
  const judge = (aware: boolean): KvInterference => {
    const plan = planned(aware);
    const senders = (plan.chains ?? []).flatMap((c) => c.slice(0, -1));
    const p99 = quantile(run(senders), 0.99);
    return { sources: (plan.chains ?? []).map((c) => c[0]!), p99Ms: p99, ratio: p99 / baseline };
  };
  return { baselineP99Ms: baseline, avoiding: judge(true), ignoring: judge(false), kvBytes, linkBytesPerS: link, multicastBytes: params.totalBytes };
}

/** Each flow's end when every sender's outbound link is shared equally by its flows at each instant (fluid model). */
function processorSharing<F extends { sender: string; startMs: number; bytes: number }>(flows: readonly F[], bytesPerS: number): (F & { doneMs: number })[] {
  const out: (F & { doneMs: number })[] = [];
  const bySender = new Map<string, F[]>();
  for (const f of flows) (bySender.get(f.sender) ?? bySender.set(f.sender, []).get(f.sender)!).push(f);
  for (const list of bySender.values()) {
    const pending = [...list].sort((a, b) => a.startMs - b.startMs);
    const active: { f: F; left: number }[] = [];
    let now = 0;
    while (pending.length > 0 || active.length > 0) {
      const perMs = active.length === 0 ? 0 : bytesPerS / 1000 / active.length;
      const nextStart = pending[0]?.startMs ?? Infinity;
      const least = active.length === 0 ? Infinity : Math.min(...active.map((a) => a.left));
      const nextEnd = now + least / perMs;
      const ends = nextEnd <= nextStart;
      const t = ends ? nextEnd : nextStart;
      for (const a of active) a.left -= perMs * (t - now);
      now = t;
      if (ends) {
        // The flows with the least left end now (float residue aside).
        for (let i = active.length - 1; i >= 0; i--) {
          if (active[i]!.left <= Math.max(1, least * 1e-9)) {
            out.push({ ...active[i]!.f, doneMs: now });
            active.splice(i, 1);
          }
        }
      }
      while (pending.length > 0 && pending[0]!.startMs <= now) {
        const f = pending.shift()!;
        active.push({ f, left: f.bytes });
      }
    }
  }
  return out;
}

