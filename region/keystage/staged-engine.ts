/**
 * A pipelined instance served by stage processes (config `keystage.stageProcesses`): the instance's head, behind the
 * `Engine` port the region's gateway routes to, runs the key-stage scaler (scaler.ts, QUART §5) over a
 * `ProcessStageFleet` (stage-fleet.ts) instead of the one-process `PipelineSim`. Every stage replica is its own
 * `tidegate engine-sim --stage` process on a node agent; the scaler's placement (placement.ts, QUART §4.3 and §6.2:
 * cache-aware when GPUs are plentiful, KL dispersion Eq. 8–10 under contention) picks the node among the region's
 * agents, and the stage cache is the agent's host memory — the model's block store the region's parameter pool put
 * there (a node whose agent holds the model's complete store has every stage cached, §6.1; a node without it is not
 * a candidate: no stage process starts without parameters). Scaling a key stage starts one more stage process there,
 * whose `/health` turns 200 after the cache hit's start time (fork + stage bytes over PCIe, cache.ts `startMs`).
 * QUART's KeysManager (§6.1) forks the new replica from a process that keeps the stage's parameters in host memory;
 * here the agent spawns a fresh engine-sim process and the host-memory copy is the agent's block store, so the real
 * process start comes on top of the modelled copy.
 *
 * A request: the head sends it to the stage-0 replica it has the fewest requests outstanding at, with the serving
 * replicas of every later stage (each kept up until the request ends, stage-fleet.ts `captured`); each stage process serves it and POSTs its activations to a replica of the next
 * stage (stage-server.ts); the last stage's tokens come back along the chain to the head, which yields them.
 *
 * GPU accounting: the head itself holds no GPU (its agent counts no slot for it, in-process-agent.ts; the region's
 * heads announce 0, region/runtime/stage-heads.ts); each stage process holds one slot on its agent, and the scaler
 * keeps their number within the instance's GPUs (the budget, `models[].gpusPerInstance`). The region's actuator
 * counts the slots as the agents announce them (region/actuator/node-placement.ts `freeSlots`) — README.md "Stage
 * processes" says what that leaves.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { MODEL_SPECS } from "../../core/models.js";
import { makeUsage } from "../../core/openai.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest } from "../../core/ports.js";
import type { PipelineSummary } from "../../engines/pipeline-summary.js";
import { seedOf } from "../../engines/sim/sim-engine.js";
import { DilatedClock, EXPECTED_OUTPUT_TOKENS, EXPECTED_PROMPT_TOKENS, instancePipeline, type PipelineEngineOptions } from "./pipeline-engine.js";
import { Cluster, KeyStageScaler } from "./scaler.js";
import { ProcessStageFleet, type StageHost, type StageReplica } from "./stage-fleet.js";
import { STAGE_HEADER, type StageRequestMeta } from "./stage-server.js";
import type { Pipeline } from "./stages.js";
import { contextLengthExceeded } from "../../core/openai.js";

/** One node agent as the head's placement sees it when the instance starts. */
export interface StageNode {
  host: StageHost;
  /** GPU slots of the node. */
  slots: number;
  /** Slots no engine holds now. */
  freeSlots: number;
  /** The agent holds the model's complete block store (every stage is in its host memory). */
  holdsModel: boolean;
}

/** Wiring of a `StagedPipelineEngine`: a PipelineEngine's (the instance's GPUs are its stage processes' budget; the region's clock), and the nodes. */
export interface StagedPipelineEngineOptions extends Omit<PipelineEngineOptions, "timeScale" | "events"> {
  /** engine-sim --time-scale of the stage processes; the head's scaler runs on the clock dilated by it. */
  timeScale: number;
  /** The region's node agents now, in a fixed order (read at start and at every pass: a node that gets the model's blocks later joins). */
  nodes: () => StageNode[];
  log: Logger;
  /** Model ms a request waits for every stage to have a serving replica before it fails (default 120000). */
  readyTimeoutMs?: number;
}

/** The pipelined instance's head over its stage processes; see the module comment. */
export class StagedPipelineEngine implements Engine {
  readonly instanceId: string;
  readonly model: string;
  readonly pipeline: Pipeline;
  readonly scaler: KeyStageScaler;
  readonly fleet: ProcessStageFleet;
  private readonly clock: Clock;
  private readonly kvPerTokenPerLayer: number;
  private readonly kvCapacityPerStage: number[];
  private readonly cluster: Cluster;
  private readonly nodeCount: number;
  /** Nodes whose GPUs the scaler may place on (they hold the model's blocks). */
  private readonly opened = new Set<number>();
  private inFlight = 0;
  private inFlightTokens = 0;
  private generated = 0;
  private closed = false;

  constructor(private readonly o: StagedPipelineEngineOptions) {
    this.instanceId = o.instanceId;
    this.model = o.model;
    ({ pipeline: this.pipeline, kvPerTokenPerLayer: this.kvPerTokenPerLayer, kvCapacityPerStage: this.kvCapacityPerStage } = instancePipeline(o.instanceId, o.model, o.gpu, o.spec));
    this.clock = o.timeScale === 1 ? o.clock : new DilatedClock(o.clock, o.timeScale);
    // The region's nodes as the scaler's servers: a node without the model's blocks offers no GPU (no stage cache
    // there) until they arrive (`openNodes`).
    const nodes = o.nodes();
    this.nodeCount = nodes.length;
    const per = Math.max(1, ...nodes.map((n) => n.slots));
    this.cluster = new Cluster({ ...o.spec.cluster, gpusPerServer: per }, nodes.map(() => per));
    this.openNodes(nodes);
    let scaler: KeyStageScaler | undefined;
    this.fleet = new ProcessStageFleet({
      instanceId: o.instanceId,
      model: o.model,
      gpu: o.gpu,
      pipeline: this.pipeline,
      hosts: nodes.map((n) => n.host),
      clock: this.clock,
      timeScale: o.timeScale,
      windowMs: o.spec.params.windowMs,
      pollMs: o.spec.params.intervalMs,
      onPoll: () => this.openNodes(this.o.nodes()),
      onStopped: (r: StageReplica) => scaler?.onReplicaStopped(r),
      log: o.log.child({ instanceId: o.instanceId }),
    });
    try {
      scaler = new KeyStageScaler({
        clock: this.clock,
        sim: this.fleet,
        pipeline: this.pipeline,
        cluster: this.cluster,
        params: o.spec.params,
        mode: o.spec.mode,
        budgetGpus: o.gpus,
        expectedServiceMs: o.spec.layersPerStage.map((_, s) => this.pipeline.stageMs(s, EXPECTED_PROMPT_TOKENS, EXPECTED_OUTPUT_TOKENS)),
        cacheKey: o.model,
      });
    } catch (err) {
      void this.fleet.close();
      throw new TidegateError("invalid_config", `pipelined instance ${o.instanceId}: ${(err as Error).message}`);
    }
    this.scaler = scaler;
    // The first replicas of every stage are stage processes too, started from the stage cache (a hit's start time).
    scaler.deployInitial(true);
    scaler.start();
  }

  /** Gives the scaler the free slots of every node that now holds the model's blocks, its stages cached there (§6.1). */
  private openNodes(nodes: StageNode[]): void {
    const now = this.clock.now();
    nodes.slice(0, this.nodeCount).forEach((n, j) => {
      if (!n.holdsModel || this.opened.has(j)) return;
      this.opened.add(j);
      this.cluster.free[j] = Math.min(this.cluster.config.gpusPerServer, n.freeSlots);
      for (let s = 0; s < this.pipeline.stages; s++) this.cluster.preload(j, this.model, s, this.pipeline.stageBytes[s]!, now);
    });
  }

  private check(req: GenerateRequest): void {
    if (this.closed) throw new TidegateError("upstream_error", `instance ${this.instanceId} is closed`);
    if (req.model !== this.model) throw new TidegateError("model_not_found", `this engine serves ${this.model}, not ${req.model}`, { param: "model" });
    const max = MODEL_SPECS[this.model]!.maxContextTokens;
    if (req.promptTokens + req.maxTokens > max) throw contextLengthExceeded(req.kind, max, req.promptTokens, req.maxTokens);
  }

  /** Streams one generation through the stage processes (module comment). */
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    signal?.throwIfAborted();
    this.check(req);
    this.inFlight++;
    this.inFlightTokens += req.promptTokens + req.maxTokens;
    let later: StageReplica[][] = [];
    try {
      await this.fleet.whenComplete(this.o.readyTimeoutMs ?? 120_000, signal).catch((err: unknown) => {
        throw signal?.aborted ? err : new TidegateError("upstream_error", (err as Error).message);
      });
      const route = this.fleet.route();
      later = route.slice(1);
      // Every later replica this request may be handed to stays up until it ends (stage-fleet.ts `captured`).
      for (const r of later.flat()) r.captured++;
      const meta: StageRequestMeta = { id: req.id, seed: seedOf(req.id), promptTokens: req.promptTokens, outputTokens: req.maxTokens, next: later.map((rs) => rs.map((r) => r.url)) };
      const refused: string[] = [];
      for (const r of route[0]!.sort((a, b) => a.captured - b.captured)) {
        r.captured++;
        try {
          const res = await fetch(new URL("/tidegate/stage/run", r.url), { method: "POST", headers: { [STAGE_HEADER]: JSON.stringify(meta) }, body: new Uint8Array(0), ...(signal === undefined ? {} : { signal }) });
          if (res.status !== 200 || res.body === null) {
            refused.push(`${r.url}: ${res.status} ${(await res.text()).slice(0, 200)}`);
            continue;
          }
          yield* this.relay(res.body, req);
          return;
        } catch (err) {
          if (signal?.aborted) throw signal.reason ?? new TidegateError("cancelled", "request cancelled");
          throw toTidegateError(err);
        } finally {
          r.captured--;
        }
      }
      throw new TidegateError("upstream_error", `pipeline ${this.instanceId}: no stage-0 replica took the request (${refused.join("; ") || "none serving"})`);
    } finally {
      for (const r of later.flat()) r.captured--;
      this.inFlight--;
      this.inFlightTokens -= req.promptTokens + req.maxTokens;
    }
  }

  /** The NDJSON the stages send back, as engine events: a token per `{"t"}`, `done` at `{"done"}`, an error at `{"error"}`. */
  private async *relay(body: AsyncIterable<Uint8Array>, req: GenerateRequest): AsyncIterable<EngineEvent> {
    let part = "";
    let tokens = 0;
    const decoder = new TextDecoder();
    for await (const chunk of body) {
      part += decoder.decode(chunk, { stream: true });
      for (let nl = part.indexOf("\n"); nl !== -1; nl = part.indexOf("\n")) {
        const line = JSON.parse(part.slice(0, nl)) as { t?: string; done?: boolean; error?: string };
        part = part.slice(nl + 1);
        if (line.error !== undefined) throw new TidegateError("upstream_error", `pipeline ${this.instanceId}: ${line.error}`);
        if (line.t !== undefined) {
          tokens++;
          this.generated++;
          yield { type: "token", text: line.t, tokens: 1 };
        }
        if (line.done === true) {
          yield { type: "done", finishReason: "length", usage: makeUsage(req.promptTokens, tokens) };
          return;
        }
      }
    }
    throw new TidegateError("upstream_error", `pipeline ${this.instanceId}: stage stream ended without done`);
  }

  /**
   * Occupancy from the last poll of the stage processes: a busy replica holds one request's KV for its stage's
   * layers (the mean size of the requests in flight); capacity is every replica's GPU memory × 0.9 − its stage's
   * weights; `waiting` is stage 0's queue.
   */
  stats(): EngineStats {
    const obs = this.fleet.observe();
    const meanTokens = this.inFlight === 0 ? 0 : this.inFlightTokens / this.inFlight;
    let kvUsed = 0;
    let kvCap = 0;
    obs.forEach((o, s) => {
      kvUsed += o.busy * meanTokens * this.kvPerTokenPerLayer * this.pipeline.layout.layersPerStage[s]!;
      kvCap += o.serving * this.kvCapacityPerStage[s]!;
    });
    const waiting = Math.min(this.inFlight, obs[0]?.queue ?? 0);
    return { kvBytesUsed: kvUsed, kvBytesCapacity: kvCap, running: this.inFlight - waiting, waiting, remainingTokens: this.inFlightTokens, generatedTokensTotal: this.generated };
  }

  /** The split for the region's listing, with the node and pid of every stage process. */
  pipelineSummary(): PipelineSummary {
    const obs = this.fleet.observe();
    const plans = this.scaler.lastPlans;
    return {
      mode: this.o.spec.mode,
      budgetGpus: this.o.gpus,
      heldGpus: this.scaler.heldGpus,
      stages: obs.map((o, s) => ({ replicas: o.serving, starting: o.starting, queue: o.queue, key: plans[s]?.key ?? false })),
      scaler: { added: this.scaler.stats.added, removed: this.scaler.stats.removed, removedStarting: this.scaler.stats.removedStarting },
      processes: this.fleet.all().map((r) => ({ stage: r.stage, node: r.nodeId, pid: r.pid, state: r.state })),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.scaler.stop();
    await this.fleet.close();
  }
}
