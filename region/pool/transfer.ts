/**
 * One scale-out's parameter transfer, run over the node agents (DESIGN "Fast in-region scaling"): a multicast plan
 * from the pool's sources to the target nodes — BlitzScale chains (§5.1, Algorithm 1) by default, λScale's binomial
 * pipeline with k-way transmission (§4.2, Algorithms 1–2) once there are `binomialMinTargets` (4) or more targets —
 * executed by every node of the plan at once over the native data plane, each block's checksum verified on arrival.
 *
 * What the chain planner is told of each node (`nodeLinks`): its NVLink domain as its agent announced it (targets in
 * one domain are grouped, line 1: one loads over the network, the rest get the blocks from it; the data plane here
 * carries those "nvlink" hops over its own transport, as it has no NVLink path), and its link rate: the data plane's
 * measured receive rate from its last transfer (LinkRates), else the rate its agent announced, else the policy's
 * `linkBytesPerS` (targets fastest first, sources by remaining outbound rate, lines 4–12). Line 2 prunes the sources
 * whose outbound link serving traffic uses: a node hosting a serving prefill instance sends its prompts' KV to decode
 * instances (`sendsKv`; BlitzScale §5.1, Figure 8), so the plan leaves that direction out and takes its parameters
 * from the other sources — decode nodes, whose outbound links the KV does not use (Figure 8 d). Where every source
 * sends KV, none is pruned: the transfer goes on beside the KV rather than not at all.
 *
 * Failures: when a node fails mid-transfer (an agent killed, a peer reset or stalled), the run is cancelled on every
 * node, the node at fault is excluded (a source) or its targets reported failed (a target), and the transfer is
 * re-planned from the remaining sources for the targets that are not complete yet, up to `maxAttempts` times.
 * Targets end complete only after the agent reports every block present; when the model's origin is a seeded
 * pattern (dev, tests) the bytes are also compared with it end to end (`verify`).
 */
import { isDataPlaneError } from "../../native/errors.js";
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { AgentHandle } from "../../nodes/agent/handle.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import { idealSeconds } from "../../nodes/multicast/ideal.js";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import { planNodes, type MulticastAlgorithm, type MulticastPlan } from "../../nodes/multicast/schedule.js";
import type { ParameterPool } from "./parameter-pool.js";
import type { LinkRates } from "./rates.js";

/** How a region picks its multicast plans. */
export interface MulticastPolicy {
  /** "auto" (default): chains below `binomialMinTargets` targets, binomial from there. */
  algorithm: "auto" | "chain" | "binomial";
  binomialMinTargets: number;
  /** Expected per-link rate (bytes/s) for ideal-time estimates and chain ordering. */
  linkBytesPerS: number;
  stallMs: number;
  connectMs: number;
  maxAttempts: number;
}

export const DEFAULT_MULTICAST: MulticastPolicy = { algorithm: "auto", binomialMinTargets: 4, linkBytesPerS: 1.25e9, stallMs: 1000, connectMs: 2000, maxAttempts: 4 };

/** A model's geometry and origin. */
export interface ModelParameters {
  model: string;
  totalBytes: number;
  blockCount: number;
  /** Seed of the synthetic model (pattern origin); end-to-end verification compares targets with it. */
  seed?: number;
}

/** What a transfer needs from the region. */
export interface TransferDeps {
  clock: Clock;
  log: Logger;
  pool: ParameterPool;
  policy: MulticastPolicy;
  agent(nodeId: string): AgentHandle | undefined;
  dataAddress(nodeId: string): { host: string; port: number } | undefined;
  /** Each verified block arrival at a target (live scaling hooks in here). */
  onBlock?(nodeId: string, block: number): void;
  /** Each attempt's plan, before its stores are prepared (λScale's execution pipelines hook in here). */
  onPlan?(plan: MulticastPlan): void;
  /** What a node's agent announced of its links (handle.ts AgentInfo: NVLink domain, link rate); undefined: nothing. */
  topology?(nodeId: string): { nvlinkDomain?: string; linkBytesPerS?: number } | undefined;
  /** Measured receive rates: read for the plan, and updated from every completed target's run profile. */
  rates?: LinkRates;
  /** Whether a node's outbound link carries KV now (it hosts a serving prefill instance; Algorithm 1 line 2). */
  sendsKv?(nodeId: string): boolean;
  /**
   * CLOCK_MONOTONIC ms of this host, the clock of the nodes' run profiles (default: process.hrtime, which is
   * CLOCK_MONOTONIC on Linux): stamps the transfer's start and end so that they compare with `TargetBytes` where the
   * nodes share this host (set-up before the first byte, wrap-up after the last).
   */
  monoNowMs?(): number;
}

/** CLOCK_MONOTONIC in ms (libuv's hrtime on Linux). */
function hostMonoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** What the chain planner knows of one node: its rates (bytes/s) and NVLink domain. */
export interface NodeLinks {
  inBytesPerS: number;
  outBytesPerS: number;
  nvlinkGroup?: string;
  /** Serving traffic (prefill → decode KV) uses its outbound link (Algorithm 1 line 2). */
  servingOutbound?: boolean;
}

/**
 * A node's links for planning (see the file comment): measured inbound rate, else announced, else the policy's; the
 * announced (else the policy's) outbound rate; the announced NVLink domain.
 */
export function nodeLinks(d: Pick<TransferDeps, "topology" | "rates" | "policy" | "sendsKv">, nodeId: string): NodeLinks {
  const t = d.topology?.(nodeId);
  const announced = t?.linkBytesPerS !== undefined && t.linkBytesPerS > 0 ? t.linkBytesPerS : undefined;
  return {
    inBytesPerS: d.rates?.inBytesPerS(nodeId) ?? announced ?? d.policy.linkBytesPerS,
    outBytesPerS: announced ?? d.policy.linkBytesPerS,
    ...(t?.nvlinkDomain === undefined || t.nvlinkDomain === "" ? {} : { nvlinkGroup: t.nvlinkDomain }),
    ...(d.sendsKv?.(nodeId) === true ? { servingOutbound: true } : {}),
  };
}

/**
 * When bytes moved at one target, from its own run's profile (native RunProfile): the first payload byte received
 * and the last one received with its block verified, both CLOCK_MONOTONIC ms of that node's host.
 */
export interface TargetBytes {
  nodeId: string;
  firstByteMonoMs: number;
  lastByteMonoMs: number;
}

/** One attempt's plan, for logs and the bench. */
export interface TransferAttempt {
  algorithm: MulticastAlgorithm;
  sources: string[];
  targets: string[];
  /** From the attempt's start (planned, before the targets' stores are prepared) to every node's run ending. */
  elapsedMs: number;
  /** Each target that received bytes (a failed attempt may list fewer). */
  bytes: TargetBytes[];
  /**
   * The data plane's own time: the first payload byte at any target to the last verified byte at any target
   * (max lastByteMonoMs − min firstByteMonoMs); undefined when no byte arrived. Planning, store preparation, the
   * run calls and the peers' dials come before it. CLOCK_MONOTONIC is per host: the figure holds when the plan's
   * nodes share one host's clock (one machine's network namespaces: bench:scaleout, test/netns); across hosts read
   * each target's own span in `bytes`.
   */
  dataPlaneMs?: number;
  /** The plan's ideal time on links at `policy.linkBytesPerS`. */
  idealMs: number;
  /** Chains only: each chain from its source, and the NVLink-group hops (representative → member; §5.1 line 1). */
  chains?: string[][];
  nvlink?: { from: string; to: string }[];
  error?: string;
}

export interface TransferResult {
  model: string;
  completed: string[];
  failed: { nodeId: string; error: string }[];
  attempts: TransferAttempt[];
  /** From runTransfer's call to its end: planning, store preparation, every attempt and the end-to-end checks. */
  elapsedMs: number;
  /** runTransfer's call and end on this host's CLOCK_MONOTONIC (TransferDeps.monoNowMs), ms. */
  startMonoMs: number;
  endMonoMs: number;
  /** The first payload byte at any target and the last verified byte at any target, over every attempt (CLOCK_MONOTONIC of the nodes' host). */
  firstByteMonoMs?: number;
  lastByteMonoMs?: number;
  /** The attempts' data-plane times summed (TransferAttempt.dataPlaneMs); undefined when no byte moved. */
  dataPlaneMs?: number;
}

/**
 * The plan for `sources` → `targets` under `policy`; `links` says what is known of each node (default: nothing, every
 * link at `policy.linkBytesPerS` and no NVLink domain).
 */
export function planTransfer(p: ModelParameters, sources: string[], targets: string[], policy: MulticastPolicy, links: (nodeId: string) => NodeLinks = () => ({ inBytesPerS: policy.linkBytesPerS, outBytesPerS: policy.linkBytesPerS })): MulticastPlan {
  const model = { totalBytes: p.totalBytes, blockCount: p.blockCount };
  const binomial = policy.algorithm === "binomial" || (policy.algorithm === "auto" && targets.length >= policy.binomialMinTargets);
  if (binomial) return planBinomial({ model, sources, targets });
  // Line 2: sources whose outbound link carries KV are left out, unless that would leave none.
  const kv = new Set(sources.filter((id) => links(id).servingOutbound === true));
  const prune = kv.size < sources.length;
  return planChains({
    model,
    sources: sources.map((id) => ({ id, outBytesPerS: links(id).outBytesPerS, ...(prune && kv.has(id) ? { servingOutbound: true } : {}) })),
    targets: targets.map((id) => {
      const l = links(id);
      return { id, inBytesPerS: l.inBytesPerS, ...(l.nvlinkGroup === undefined ? {} : { nvlinkGroup: l.nvlinkGroup }) };
    }),
  });
}

/** Ideal seconds of a plan with every link at `linkBytesPerS` (nodes/multicast/ideal.ts), one source per sub-group. */
export function planIdealMs(plan: MulticastPlan, linkBytesPerS: number): number {
  const k = Math.max(1, Math.min(plan.sources.length, plan.targets.length));
  const nodes = Math.ceil(plan.targets.length / k) + 1;
  return 1000 * idealSeconds(plan.algorithm, { totalBytes: plan.totalBytes, blockCount: plan.blockCount, nodes, linkBytesPerS });
}

/** The node a failed run names: the data plane's peer, else the node whose own call failed. */
function culprit(err: unknown, callerNode: string): string {
  if (isDataPlaneError(err) && err.peer !== undefined && err.peer !== "") return err.peer;
  return callerNode;
}

/**
 * Moves `p`'s blocks to `targets` from the pool's sources, re-planning around failed nodes. Resolves with what
 * completed and what failed; rejects only when no source exists at all (TidegateError `upstream_error`, "no source").
 */
export async function runTransfer(p: ModelParameters, targets: readonly string[], d: TransferDeps): Promise<TransferResult> {
  const monoNow = d.monoNowMs ?? hostMonoMs;
  const t0 = d.clock.now();
  const startMonoMs = monoNow();
  const excluded = new Set<string>();
  const failed = new Map<string, string>();
  // A target that already holds a complete copy (it became a source meanwhile) needs nothing.
  const completed = new Set<string>(targets.filter((t) => d.pool.copy(t, p.model)?.complete === true));
  const attempts: TransferAttempt[] = [];
  const log = d.log.child({ model: p.model });
  for (let attempt = 0; ; attempt++) {
    const pending = targets.filter((t) => !completed.has(t) && !failed.has(t));
    if (pending.length === 0) break;
    const sources = d.pool.sources(p.model).filter((s) => !excluded.has(s) && !targets.includes(s) && d.agent(s) !== undefined && d.dataAddress(s) !== undefined);
    if (sources.length === 0) {
      const why = `no source of ${p.model} in the region (no live agent holds a complete copy${excluded.size > 0 ? `; excluded after failures: ${[...excluded].join(", ")}` : ""})`;
      if (attempt === 0) throw new TidegateError("upstream_error", why);
      for (const t of pending) failed.set(t, why);
      break;
    }
    if (attempt >= d.policy.maxAttempts) {
      for (const t of pending) failed.set(t, `gave up after ${attempt} attempts`);
      break;
    }
    const plan = planTransfer(p, sources, pending, d.policy, (n) => nodeLinks(d, n));
    d.onPlan?.(plan);
    const nodes = planNodes(plan);
    const addresses: Record<string, { host: string; port: number }> = {};
    for (const n of nodes) addresses[n] = d.dataAddress(n)!;
    const at = d.clock.now();
    const nvlink = [...new Map(plan.transfers.filter((t) => t.medium === "nvlink").map((t) => [`${t.from}>${t.to}`, { from: t.from, to: t.to }])).values()];
    const record: TransferAttempt = {
      algorithm: plan.algorithm,
      sources: plan.sources,
      targets: plan.targets,
      elapsedMs: 0,
      bytes: [],
      idealMs: planIdealMs(plan, d.policy.linkBytesPerS),
      ...(plan.chains === undefined ? {} : { chains: plan.chains }),
      ...(nvlink.length === 0 ? {} : { nvlink }),
    };
    attempts.push(record);
    // Targets get empty stores first (a partial store of an earlier attempt is replaced).
    const prepared = await Promise.allSettled(pending.map((t) => d.agent(t)!.load({ model: p.model, totalBytes: p.totalBytes, blockCount: p.blockCount, fill: "empty" })));
    let prepFailed = false;
    prepared.forEach((r, i) => {
      const t = pending[i]!;
      if (r.status === "rejected") {
        failed.set(t, `preparing the store failed: ${toTidegateError(r.reason).message}`);
        prepFailed = true;
      } else d.pool.setCopy(t, p.model, p.totalBytes, false, d.clock.now());
    });
    if (prepFailed) continue;
    const runId = Math.floor(Math.random() * 2 ** 31);
    const ac = new AbortController();
    log.info("transfer started", { attempt, algorithm: plan.algorithm, sources: plan.sources, targets: plan.targets, runId, ...(record.chains === undefined ? {} : { chains: record.chains }), ...(record.nvlink === undefined ? {} : { nvlink: record.nvlink }) });
    const runs = nodes.map((n) =>
      d
        .agent(n)!
        .run({ model: p.model, plan, runId, addresses, stallMs: d.policy.stallMs, connectMs: d.policy.connectMs }, (a) => (plan.targets.includes(n) ? d.onBlock?.(n, a.block) : undefined), ac.signal)
        .then(
          (r) => {
            const p = r.profile;
            if (plan.targets.includes(n) && p.firstByteMs >= 0 && p.lastByteMs >= 0) record.bytes.push({ nodeId: n, firstByteMonoMs: p.startMonoMs + p.firstByteMs, lastByteMonoMs: p.startMonoMs + p.lastByteMs });
            return undefined;
          },
          (err: unknown) => {
            // The first real failure cancels everyone else; what fails after that (cancelled runs, calls cut by the
            // cancel) is a consequence, not a cause.
            const cause = !ac.signal.aborted;
            if (cause) ac.abort();
            return { node: n, err, cause };
          },
        ),
    );
    const outcomes = await Promise.all(runs);
    record.elapsedMs = d.clock.now() - at;
    if (record.bytes.length > 0) record.dataPlaneMs = Math.max(...record.bytes.map((b) => b.lastByteMonoMs)) - Math.min(...record.bytes.map((b) => b.firstByteMonoMs));
    const errors = outcomes.filter((o): o is { node: string; err: unknown; cause: boolean } => o !== undefined);
    const causes = errors.filter((e) => e.cause);
    for (const s of plan.sources) d.pool.touch(s, p.model, d.clock.now());
    if (errors.length === 0) {
      for (const t of plan.targets) completed.add(t);
      // Every target received the whole model: its span is its measured receive rate (LinkRates).
      for (const b of record.bytes) d.rates?.observe(b.nodeId, p.totalBytes, b.lastByteMonoMs - b.firstByteMonoMs);
    } else {
      const first = causes[0] ?? errors[0]!;
      record.error = `${first.node}: ${toTidegateError(first.err).message}`;
      const blamed = new Set(causes.map((c) => culprit(c.err, c.node)));
      log.warn("transfer failed, re-planning", { attempt, error: record.error, blamed: [...blamed] });
      for (const b of blamed) {
        if (plan.targets.includes(b)) failed.set(b, record.error);
        else excluded.add(b);
      }
      // A target that got every block before the failure is done.
      await Promise.all(
        plan.targets
          .filter((t) => !failed.has(t))
          .map(async (t) => {
            const a = await d.agent(t)?.announcement().catch(() => undefined);
            const s = a?.stores.find((x) => x.model === p.model);
            if (s !== undefined && s.present === s.blockCount) completed.add(t);
          }),
      );
    }
    // End-to-end check of what completed against the origin pattern.
    if (p.seed !== undefined) {
      for (const t of [...completed]) {
        if (d.pool.copy(t, p.model)?.complete === true) continue;
        const v = await d.agent(t)!.verify(p.model, p.seed).catch((err: unknown) => ({ firstMismatch: -2, present: 0, err }));
        if (v.firstMismatch !== -1) {
          completed.delete(t);
          failed.set(t, v.firstMismatch === -2 ? "verification call failed" : `block ${v.firstMismatch} differs from the origin after the transfer`);
        }
      }
    }
    for (const t of completed) d.pool.setCopy(t, p.model, p.totalBytes, true, d.clock.now());
  }
  for (const t of failed.keys()) d.pool.dropCopy(t, p.model);
  const moved = attempts.filter((a) => a.dataPlaneMs !== undefined);
  const bytes = moved.flatMap((a) => a.bytes);
  const result: TransferResult = {
    model: p.model,
    completed: [...completed],
    failed: [...failed].map(([nodeId, error]) => ({ nodeId, error })),
    attempts,
    elapsedMs: d.clock.now() - t0,
    startMonoMs,
    endMonoMs: monoNow(),
    ...(moved.length === 0
      ? {}
      : { dataPlaneMs: moved.reduce((a, x) => a + x.dataPlaneMs!, 0), firstByteMonoMs: Math.min(...bytes.map((b) => b.firstByteMonoMs)), lastByteMonoMs: Math.max(...bytes.map((b) => b.lastByteMonoMs)) }),
  };
  const ms = (x: number) => Math.round(x * 10) / 10;
  log.info("transfer finished", {
    completed: result.completed,
    failed: result.failed,
    attempts: attempts.length,
    elapsedMs: Math.round(result.elapsedMs),
    startMonoMs: ms(result.startMonoMs),
    endMonoMs: ms(result.endMonoMs),
    ...(result.dataPlaneMs === undefined ? {} : { dataPlaneMs: ms(result.dataPlaneMs), firstByteMonoMs: ms(result.firstByteMonoMs!), lastByteMonoMs: ms(result.lastByteMonoMs!) }),
  });
  return result;
}

