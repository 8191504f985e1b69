/**
 * The gateway's instance table: the models served in one region, each model's endpoints (deployments, `model/gpu`)
 * and each endpoint's instances (an `Engine` plus a lifecycle state). Each instance also carries what the chooser
 * keeps on it (its last stats and the in-flight estimate since; chooser.ts) and the streams on it now, so that
 * `engineDown` can end them. Listeners hear of every instance added, removed or moved (RegionService.onChange).
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { MODEL_SPECS, kvBytesPerToken, type GpuType, type ModelName, type RegionName } from "../../core/models.js";
import type { Engine, EngineStats, InstanceState } from "../../core/ports.js";

/** A read-only view of one instance, for the region controller and tests. */
export interface InstanceView {
  instanceId: string;
  model: ModelName;
  endpointId: string;
  gpu: GpuType;
  state: InstanceState;
  /** Requests the gateway has streaming on it now. */
  inFlight: number;
  /** When it entered `state` (clock ms). */
  enteredAtMs: number;
  /** Its engine's stats are stale (EngineStats.stale): routed around while another instance serves. */
  stale: boolean;
  /** Why the region believes its engine down (`engineDown`); undefined while it does not. It takes no request then. */
  down: string | undefined;
  /** Its role in prefill/decode disaggregation (Engine.role; roles.ts). */
  role: NonNullable<Engine["role"]>;
}

/** One instance of an endpoint. */
export interface InstanceRecord {
  engine: Engine;
  endpoint: EndpointRecord;
  state: InstanceState;
  stats: EngineStats;
  statsAtMs: number;
  /** Bumped at every refresh; a request's correction is undone only within the epoch it was added in. */
  epoch: number;
  addedTokens: number;
  addedKvBytes: number;
  inFlight: number;
  /** When it entered `state` (clock ms). */
  enteredAtMs: number;
  /** Why the region believes its engine down (engineDown), or undefined. */
  down: string | undefined;
  /** The streams (`generate`) on it now: each one's upstream abort and, once failed by `engineDown`, why. */
  attempts: Set<Attempt>;
}

/** One `generate` attempt on an instance: aborting `upstream` with `failure` set ends it as that failure. */
export interface Attempt {
  upstream: AbortController;
  failure: TidegateError | undefined;
}

/** One endpoint (deployment) of a model. */
export interface EndpointRecord {
  endpointId: string;
  gpu: GpuType;
  instances: InstanceRecord[];
  /** Routing inputs, rebuilt in `Chooser.choose`: estimated utilization and the per-instance remaining-token loads. */
  effectiveMemoryUtilization: number;
  loads: { instanceId: string; remainingTokens: number; serving: boolean; waiting: number; kvUtilization: number; rec: InstanceRecord }[];
}

/** One model's endpoints, in the order they were added. */
export interface ModelEntry {
  model: ModelName;
  kvBytesPerToken: number;
  endpoints: EndpointRecord[];
}

export interface InstanceTableOptions {
  region: RegionName;
  clock: Clock;
  /** A model got its first endpoint (the judge opens its books). */
  onModel?(model: ModelName): void;
  /** An instance was added, before the change listeners hear of it (the chooser indexes its prefixes). */
  onAdded?(rec: InstanceRecord, kvBytesPerToken: number): void;
  /** An instance was removed, before the change listeners hear of it. */
  onRemoved?(instanceId: string): void;
}

const ZERO_STATS: EngineStats = { kvBytesUsed: 0, kvBytesCapacity: 0, running: 0, waiting: 0, remainingTokens: 0, generatedTokensTotal: 0 };

/** Models → endpoints → instances of one region. Not thread-safe (one event loop). */
export class InstanceTable {
  /** Every model with an endpoint here, in the order its first endpoint was added. */
  readonly models = new Map<ModelName, ModelEntry>();
  private readonly byId = new Map<string, InstanceRecord>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly o: InstanceTableOptions) {}

  /** Adds an endpoint (deployment) of `model` on `gpu`; its id is `model/gpu`. Adding it twice is a no-op. */
  addEndpoint(model: ModelName, gpu: GpuType): string {
    const spec = MODEL_SPECS[model];
    if (spec === undefined) throw new TidegateError("invalid_config", `unknown model ${JSON.stringify(model)}`);
    let m = this.models.get(model);
    if (m === undefined) {
      m = { model, kvBytesPerToken: kvBytesPerToken(spec), endpoints: [] };
      this.models.set(model, m);
      this.o.onModel?.(model);
    }
    const endpointId = `${model}/${gpu}`;
    if (!m.endpoints.some((e) => e.endpointId === endpointId)) {
      m.endpoints.push({ endpointId, gpu, instances: [], effectiveMemoryUtilization: 0, loads: [] });
    }
    return endpointId;
  }

  /** Adds an instance to an endpoint (created if needed). Its `instanceId` must be unique in the region. */
  addInstance(gpu: GpuType, engine: Engine, state: InstanceState): void {
    if (this.byId.has(engine.instanceId)) throw new TidegateError("conflict", `instance ${engine.instanceId} already exists`);
    const endpointId = this.addEndpoint(engine.model, gpu);
    const m = this.models.get(engine.model)!;
    const endpoint = m.endpoints.find((e) => e.endpointId === endpointId)!;
    const rec: InstanceRecord = { engine, endpoint, state, stats: ZERO_STATS, statsAtMs: -Infinity, epoch: 0, addedTokens: 0, addedKvBytes: 0, inFlight: 0, enteredAtMs: this.o.clock.now(), down: undefined, attempts: new Set() };
    endpoint.instances.push(rec);
    this.byId.set(engine.instanceId, rec);
    this.o.onAdded?.(rec, m.kvBytesPerToken);
    this.changed();
  }

  /** Calls `cb` after every instance added, removed or moved to another state, in subscription order. */
  onChange(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Whether some instance of `model` serves here now. */
  serves(model: ModelName): boolean {
    const m = this.models.get(model);
    return m !== undefined && m.endpoints.some((e) => e.instances.some((i) => i.state === "serving"));
  }

  /** Moves an instance to another lifecycle state; only `serving` instances take new requests. */
  setInstanceState(instanceId: string, state: InstanceState): void {
    const rec = this.instance(instanceId);
    if (rec.state === state) return;
    rec.enteredAtMs = this.o.clock.now();
    rec.state = state;
    this.changed();
  }

  /**
   * The region believes the instance's engine down (issue 49 item 2; region/process/engine-health.ts: it refused, or
   * owed bytes and sent none): from now until `engineUp` it takes no request — whatever its state, so an ejection cap
   * that keeps it `serving` keeps no request waiting on it — its stats count as stale (full, in telemetry), and every
   * stream on it now is ended with `upstream_error` "instance … stopped answering (reason)": one without a first event is
   * retried on another instance (then, failing there too or with none left, by the router in another region), one
   * with it ends with that error. Returns how many streams it ended. Idempotent; unknown instance: not_found.
   */
  engineDown(instanceId: string, reason: string): number {
    const rec = this.instance(instanceId);
    const was = rec.down;
    rec.down = reason;
    let ended = 0;
    for (const a of rec.attempts) {
      if (a.failure !== undefined) continue;
      a.failure = new TidegateError("upstream_error", `instance ${instanceId} stopped answering (${reason})`);
      a.upstream.abort(a.failure);
      ended++;
    }
    if (was === undefined) this.changed();
    return ended;
  }

  /** The engine answers again: the instance takes requests as its state allows (undoes `engineDown`). */
  engineUp(instanceId: string): void {
    const rec = this.instance(instanceId);
    if (rec.down === undefined) return;
    rec.down = undefined;
    this.changed();
  }

  /** Removes an instance (its in-flight streams continue) and returns its engine for the caller to close. */
  removeInstance(instanceId: string): Engine {
    const rec = this.instance(instanceId);
    const list = rec.endpoint.instances;
    list.splice(list.indexOf(rec), 1);
    this.byId.delete(instanceId);
    this.o.onRemoved?.(instanceId);
    this.changed();
    return rec.engine;
  }

  /** The engine of an instance in the table, if any. */
  engine(instanceId: string): Engine | undefined {
    return this.byId.get(instanceId)?.engine;
  }

  /** Every instance's engine, in the order the instances were added. */
  engines(): Engine[] {
    return [...this.byId.values()].map((i) => i.engine);
  }

  /** Every instance, in endpoint order. */
  views(): InstanceView[] {
    const out: InstanceView[] = [];
    for (const m of this.models.values()) {
      for (const e of m.endpoints) {
        for (const i of e.instances) out.push({ instanceId: i.engine.instanceId, model: m.model, endpointId: e.endpointId, gpu: e.gpu, state: i.state, inFlight: i.inFlight, enteredAtMs: i.enteredAtMs, stale: i.stats.stale === true, down: i.down, role: i.engine.role ?? "both" });
      }
    }
    return out;
  }

  /** `model`'s endpoints; model_not_found when it has none here. */
  model(model: ModelName): ModelEntry {
    const m = this.models.get(model);
    if (m === undefined) throw new TidegateError("model_not_found", `model ${JSON.stringify(model)} is not served in region ${this.o.region}`, { param: "model" });
    return m;
  }

  private instance(instanceId: string): InstanceRecord {
    const rec = this.byId.get(instanceId);
    if (rec === undefined) throw new TidegateError("not_found", `no instance ${JSON.stringify(instanceId)} in region ${this.o.region}`);
    return rec;
  }

  private changed(): void {
    for (const cb of [...this.listeners]) cb();
  }
}
