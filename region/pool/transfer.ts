/**
 * One scale-out's parameter transfer, run over the node agents (DESIGN "Fast in-region scaling"): a multicast plan
 * from the pool's sources to the target nodes — BlitzScale chains (§5.1, Algorithm 1) by default, λScale's binomial
 * pipeline with k-way transmission (§4.2, Algorithms 1–2) once there are `binomialMinTargets` (4) or more targets —
 * executed by every node of the plan at once over the native data plane, each block's checksum verified on arrival.
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
import type { AgentHandle } from "../agent/handle.js";
import { planChains } from "../multicast/blitzscale.js";
import { idealSeconds } from "../multicast/ideal.js";
import { planBinomial } from "../multicast/lambdascale.js";
import { planNodes, type MulticastAlgorithm, type MulticastPlan } from "../multicast/schedule.js";
import type { ParameterPool } from "./pool.js";

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
}

/** One attempt's plan, for logs and the bench. */
export interface TransferAttempt {
  algorithm: MulticastAlgorithm;
  sources: string[];
  targets: string[];
  elapsedMs: number;
  /** The plan's ideal time on links at `policy.linkBytesPerS`. */
  idealMs: number;
  error?: string;
}

export interface TransferResult {
  model: string;
  completed: string[];
  failed: { nodeId: string; error: string }[];
  attempts: TransferAttempt[];
  elapsedMs: number;
}

/** The plan for `sources` → `targets` under `policy`. */
export function planTransfer(p: ModelParameters, sources: string[], targets: string[], policy: MulticastPolicy): MulticastPlan {
  const model = { totalBytes: p.totalBytes, blockCount: p.blockCount };
  const binomial = policy.algorithm === "binomial" || (policy.algorithm === "auto" && targets.length >= policy.binomialMinTargets);
  if (binomial) return planBinomial({ model, sources, targets });
  return planChains({ model, sources: sources.map((id) => ({ id, outBytesPerS: policy.linkBytesPerS })), targets: targets.map((id) => ({ id, inBytesPerS: policy.linkBytesPerS })) });
}

/** Ideal seconds of a plan with every link at `linkBytesPerS` (region/multicast/ideal.ts), one source per sub-group. */
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
  const t0 = d.clock.now();
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
    const plan = planTransfer(p, sources, pending, d.policy);
    const nodes = planNodes(plan);
    const addresses: Record<string, { host: string; port: number }> = {};
    for (const n of nodes) addresses[n] = d.dataAddress(n)!;
    const at = d.clock.now();
    const record: TransferAttempt = { algorithm: plan.algorithm, sources: plan.sources, targets: plan.targets, elapsedMs: 0, idealMs: planIdealMs(plan, d.policy.linkBytesPerS) };
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
    log.info("transfer started", { attempt, algorithm: plan.algorithm, sources: plan.sources, targets: plan.targets, runId });
    const runs = nodes.map((n) =>
      d
        .agent(n)!
        .run({ model: p.model, plan, runId, addresses, stallMs: d.policy.stallMs, connectMs: d.policy.connectMs }, (a) => (plan.targets.includes(n) ? d.onBlock?.(n, a.block) : undefined), ac.signal)
        .then(
          () => undefined,
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
    const errors = outcomes.filter((o): o is { node: string; err: unknown; cause: boolean } => o !== undefined);
    const causes = errors.filter((e) => e.cause);
    for (const s of plan.sources) d.pool.touch(s, p.model, d.clock.now());
    if (errors.length === 0) {
      for (const t of plan.targets) completed.add(t);
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
  const result: TransferResult = { model: p.model, completed: [...completed], failed: [...failed].map(([nodeId, error]) => ({ nodeId, error })), attempts, elapsedMs: d.clock.now() - t0 };
  log.info("transfer finished", { completed: result.completed, failed: result.failed, attempts: attempts.length, elapsedMs: Math.round(result.elapsedMs) });
  return result;
}

