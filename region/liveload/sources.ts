/**
 * Where a new instance's parameters come from, as the named configurations a capacity planner would compare
 * (issue 12): each source gives the time every layer reaches each new instance and the live scheduler that may
 * use partially loaded instances.
 *
 * - `ssd` — ServerlessLLM: a per-host cache in host memory with a 5-minute keep-alive; a hit loads host → GPU over
 *   PCIe, a miss from SSD; the instance serves once loaded (stop-the-world).
 * - `allcache` — every host holds every model in host memory: always PCIe (the upper bound of host caching).
 * - `network` — this project's parameter pool: a BlitzScale chain from a GPU that serves the model to the new
 *   instances over RDMA (nodes/multicast), stop-the-world.
 * - `blitzscale` — `network` with zigzag live scaling (BlitzScale §5.2; zigzag.ts).
 * - `lambdascale` — λScale's binomial multicast with execution pipelines, then local mode (λScale §4; lambda.ts).
 * - `faasnet-tree` — λScale's FaaSNet baseline (§7.1): one serving GPU feeds a binary tree of the new instances
 *   over RDMA (nodes/multicast/baselines.ts planBinaryTree, each internal node's uplink carrying every block
 *   twice: multicast/timing.ts), stop-the-world.
 * - `nccl-ring` — λScale's NCCL baseline (§7.1): a ring broadcast from one serving GPU (planRingBroadcast) after a
 *   new process group is created, NCCL_GROUP_SETUP_MS (§7.2: "up to hundreds of milliseconds"), stop-the-world.
 *
 * Bandwidths default to BlitzScale's Table 1, cluster A: 1.6 Tbps NVLink inside a host, 100 Gbps RDMA between
 * hosts, 128 Gbps host → GPU PCIe, 10 Gbps SSD → GPU.
 */
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { planBinaryTree, planRingBroadcast } from "../../nodes/multicast/baselines.js";
import { linkArrivalTimes } from "../../nodes/multicast/timing.js";
import { arrivalTimes, lambdaPipelines, type PipelinePhase } from "./lambda.js";

/** Link bandwidths a load uses, bits per second. */
export interface LoadBandwidths {
  nvlinkBitsPerS: number;
  rdmaBitsPerS: number;
  pcieBitsPerS: number;
  ssdBitsPerS: number;
}

/** BlitzScale Table 1, cluster A. */
export const TABLE1_CLUSTER_A: LoadBandwidths = { nvlinkBitsPerS: 1.6e12, rdmaBitsPerS: 100e9, pcieBitsPerS: 128e9, ssdBitsPerS: 10e9 };

export type LoadingSourceName = "ssd" | "allcache" | "network" | "blitzscale" | "lambdascale" | "faasnet-tree" | "nccl-ring";

/**
 * NCCL's group creation before each scale-out's broadcast (`nccl-ring`): λScale §7.2 observes "up to hundreds of
 * milliseconds" (Fig. 8, its reference [9]); 100 ms, the low end, so that the baseline is not made slower than the paper says.
 */
export const NCCL_GROUP_SETUP_MS = 100;
export type LiveScheduler = "stop-the-world" | "best-effort" | "zigzag" | "lambda-pipelines";

export const LIVE_SCHEDULERS: readonly LiveScheduler[] = ["stop-the-world", "best-effort", "zigzag", "lambda-pipelines"];

export interface LoadingSource {
  name: LoadingSourceName;
  scheduler: LiveScheduler;
  /** One line for reports. */
  description: string;
}

export const LOADING_SOURCES: Record<LoadingSourceName, LoadingSource> = {
  ssd: { name: "ssd", scheduler: "stop-the-world", description: "ServerlessLLM: host cache with a 5-minute keep-alive, a miss loads from SSD" },
  allcache: { name: "allcache", scheduler: "stop-the-world", description: "every host holds every model in host memory (upper bound)" },
  network: { name: "network", scheduler: "stop-the-world", description: "parameter pool + RDMA chain multicast, serving once loaded" },
  blitzscale: { name: "blitzscale", scheduler: "zigzag", description: "parameter pool + RDMA chain multicast, zigzag live scaling" },
  lambdascale: { name: "lambdascale", scheduler: "lambda-pipelines", description: "binomial multicast, execution pipelines, then local mode" },
  "faasnet-tree": { name: "faasnet-tree", scheduler: "stop-the-world", description: "λScale's FaaSNet baseline: binary-tree RDMA multicast from one serving GPU, serving once loaded" },
  "nccl-ring": { name: "nccl-ring", scheduler: "stop-the-world", description: "λScale's NCCL baseline: group set-up, then ring broadcast from one serving GPU, serving once loaded" },
};

/** Parses a source name, naming the valid ones when it is not one. */
export function loadingSource(name: string): LoadingSource {
  const s = (LOADING_SOURCES as Record<string, LoadingSource | undefined>)[name];
  if (s === undefined) throw new RangeError(`unknown loading source ${JSON.stringify(name)} (one of ${Object.keys(LOADING_SOURCES).join(", ")})`);
  return s;
}

/** The model being loaded: its parameter bytes, layers, and the blocks the network moves it in. */
export interface LoadModel {
  bytes: number;
  layers: number;
  blocks: number;
}

/** One scale-out: how many new instances, and (ssd) whether each one's host still caches the model. */
export interface ScaleOut {
  targets: number;
  /**
   * Per target, whether its host's memory holds the model: ssd, its keep-alive cache (a hit loads over PCIe, a miss
   * from SSD); the network sources, the parameter pool's copy (loaded over PCIe, not multicast). Default none.
   */
  hostCached?: boolean[];
  /** network sources: how many GPUs serve the model now (the multicast's sources); default 1. */
  servingSources?: number;
}

/** One scale-out's load: when each layer reaches each new instance, and (lambdascale) its execution pipelines. */
export interface LoadEpisode {
  /** arrivals[target][layer], ms from the scale-out decision. */
  arrivals: number[][];
  /** lambdascale: λScale's execution pipelines (nodes `t0`…: target indices), times in ms from the decision. */
  pipelines?: PipelinePhase[];
}

/**
 * When each layer reaches each new instance, in ms from the scale-out decision: arrivals[target][layer]. Layer l
 * is there once every block holding part of it is (blocks cut the model's bytes evenly, layers too).
 */
export function layerArrivals(source: LoadingSourceName, m: LoadModel, so: ScaleOut, bw: LoadBandwidths = TABLE1_CLUSTER_A): number[][] {
  return loadEpisode(source, m, so, bw).arrivals;
}

/** `layerArrivals` with the λScale execution pipelines of the scale-out (lambdascale only). */
export function loadEpisode(source: LoadingSourceName, m: LoadModel, so: ScaleOut, bw: LoadBandwidths = TABLE1_CLUSTER_A): LoadEpisode {
  if (!(m.bytes > 0) || !Number.isInteger(m.layers) || m.layers < 1 || !Number.isInteger(m.blocks) || m.blocks < 1) throw new RangeError("model needs bytes > 0 and whole layers and blocks ≥ 1");
  if (!Number.isInteger(so.targets) || so.targets < 1) throw new RangeError(`targets must be a positive integer, got ${so.targets}`);
  const layerMs = (bitsPerS: number) => Array.from({ length: m.layers }, (_, l) => (((l + 1) * m.bytes) / m.layers / (bitsPerS / 8)) * 1000);
  switch (source) {
    case "allcache":
      return { arrivals: Array.from({ length: so.targets }, () => layerMs(bw.pcieBitsPerS)) };
    case "ssd":
      return { arrivals: Array.from({ length: so.targets }, (_, t) => layerMs(so.hostCached?.[t] === true ? bw.pcieBitsPerS : bw.ssdBitsPerS)) };
    case "network":
    case "blitzscale":
    case "lambdascale":
    case "faasnet-tree":
    case "nccl-ring": {
      // A target whose host holds the pool's copy of the model (hostCached: its own O(1) copy, BlitzScale §4.1)
      // loads it over PCIe; the others through the multicast plan. Plan node `t<i>` is target i.
      const local = layerMs(bw.pcieBitsPerS);
      const remote = Array.from({ length: so.targets }, (_, i) => i).filter((i) => so.hostCached?.[i] !== true);
      if (remote.length === 0) return { arrivals: Array.from({ length: so.targets }, () => local) };
      // λScale's baselines feed every new instance from one source (FaaSNet's tree root, NCCL's broadcast root).
      const baseline = source === "faasnet-tree" || source === "nccl-ring";
      const k = baseline ? 1 : Math.max(1, Math.min(so.servingSources ?? 1, remote.length));
      const sources = Array.from({ length: k }, (_, i) => `src${i}`);
      const targets = remote.map((i) => `t${i}`);
      const model = { totalBytes: Math.ceil(m.bytes), blockCount: m.blocks };
      const plan: MulticastPlan =
        source === "lambdascale"
          ? planBinomial({ model, sources, targets })
          : source === "faasnet-tree"
            ? planBinaryTree({ model, source: sources[0]!, targets })
            : source === "nccl-ring"
              ? planRingBroadcast({ model, source: sources[0]!, targets })
              : planChains({ model, sources: sources.map((id) => ({ id, outBytesPerS: bw.rdmaBitsPerS / 8 })), targets: targets.map((id) => ({ id, inBytesPerS: bw.rdmaBitsPerS / 8 })) });
      // one step moves one block over one RDMA link (chains: a block per hop per step; binomial: §4.2's steps)
      const stepMs = (m.bytes / m.blocks / (bw.rdmaBitsPerS / 8)) * 1000;
      // The baselines on the link model (a tree's internal uplinks carry two copies of each block), after NCCL's
      // group set-up; the chain and binomial plans on their synchronous steps (the same times: multicast/timing.ts).
      const at = baseline ? linkArrivalTimes(plan, stepMs) : arrivalTimes(plan, stepMs);
      const setupMs = source === "nccl-ring" ? NCCL_GROUP_SETUP_MS : 0;
      const arrivals = Array.from({ length: so.targets }, (_, i) => `t${i}`).map((t) => {
        const blocks = at.get(t);
        if (blocks === undefined) return local;
        return Array.from({ length: m.layers }, (_, l) => {
          // blocks covering layer l: [floor(l·b/L), ceil((l+1)·b/L))
          const from = Math.floor((l * m.blocks) / m.layers);
          const to = Math.max(from + 1, Math.ceil(((l + 1) * m.blocks) / m.layers));
          let t0 = 0;
          for (let b = from; b < to; b++) t0 = Math.max(t0, blocks[b]!);
          return setupMs + t0;
        });
      });
      return source === "lambdascale" ? { arrivals, pipelines: lambdaPipelines(plan, stepMs) } : { arrivals };
    }
  }
}

/**
 * ServerlessLLM's host cache (the `ssd` source): a model stays in a host's memory for `keepAliveMs` after its last
 * use (5 minutes by default); loading it again within that is a hit. With `modelsPerHost`, a host's memory holds at
 * most that many models: using one more evicts the least recently used (a model-as-a-service host whose memory holds
 * only some of the zoo, issue 33). Default: unbounded.
 */
export class KeepAliveCache {
  /** host → model → last use (Map order: least recently used first). */
  private readonly hosts = new Map<string, Map<string, number>>();
  constructor(
    readonly keepAliveMs = 5 * 60_000,
    readonly modelsPerHost = Number.POSITIVE_INFINITY,
  ) {
    if (!(keepAliveMs >= 0)) throw new RangeError(`keepAliveMs must be ≥ 0, got ${keepAliveMs}`);
    if (!(modelsPerHost >= 1)) throw new RangeError(`modelsPerHost must be ≥ 1, got ${modelsPerHost}`);
  }
  /** Whether `host` still caches `model` at `nowMs`. */
  holds(host: string, model: string, nowMs: number): boolean {
    const t = this.hosts.get(host)?.get(model);
    return t !== undefined && nowMs - t <= this.keepAliveMs;
  }
  /** `host` used (loaded or served) `model` at `nowMs`; evicts its least recently used model beyond `modelsPerHost`. */
  touch(host: string, model: string, nowMs: number): void {
    let h = this.hosts.get(host);
    if (h === undefined) this.hosts.set(host, (h = new Map()));
    h.delete(model);
    h.set(model, nowMs);
    while (h.size > this.modelsPerHost) h.delete(h.keys().next().value!);
  }
}

/** A one-line statement of the bandwidths, printed with every result that uses them. */
export function describeBandwidths(bw: LoadBandwidths): string {
  const g = (b: number) => (b >= 1e12 ? `${b / 1e12} Tbps` : `${b / 1e9} Gbps`);
  return `NVLink ${g(bw.nvlinkBitsPerS)} in a host, RDMA ${g(bw.rdmaBitsPerS)} between hosts, PCIe ${g(bw.pcieBitsPerS)} host→GPU, SSD ${g(bw.ssdBitsPerS)} SSD→GPU`;
}
