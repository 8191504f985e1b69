/**
 * The `static` Actuator adapter (controller.actuator "static"; `tidegate region --spawn-engines`, engines.kind
 * "openai-http", `tidegate dev` with "static"): the region's instances are the configured engines, made once at
 * start by an `EngineFactory` — in-process simulated engines (region/runtime/build-sim-engine.ts), engine-sim child
 * processes (region/process/spawn.ts) or the URLs of `engines.urls` — one per slot of `instanceSlots`. It never
 * scales: provision, reclaim, redeploy and drain are refused with a `conflict` naming the region and why,
 * and the region runtime runs no controller pass over it (`fixed`), so planner targets are acknowledged and held,
 * never acted on.
 *
 * An instance is `provisioning` until its engine is made, then `serving`; from then on its state is the gateway's
 * (a static region's engine-health watch, region/process/engine-health.ts, moves an engine that stopped answering to
 * `draining` and back), so telemetry's instance counts (the actuator's) follow engine health.
 */
import type { Clock } from "../../core/clock.js";
import { instanceGpus, type TidegateConfig } from "../../core/config.js";
import { TidegateError } from "../../core/errors.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { Engine, InstanceState } from "../../core/ports.js";
import type { Gateway } from "../gateway/gateway.js";
import type { InstanceRecord, ListedInstance, NodeListing, RuntimeActuator, ScaleFailure, ScalingHooks } from "./port.js";

/** One instance to create. `url` is set for openai-http engines (from engines.urls). */
export interface InstanceSlot {
  region: RegionName;
  model: ModelName;
  gpu: GpuType;
  /** GPUs per instance (models[].gpusPerInstance[gpu]). */
  tp: number;
  /** `region/model/gpu/index`, unique in the region. */
  instanceId: string;
  url?: string;
}

/** Makes the engine of one slot; rejects when it cannot (a child that never printed its URL, a bad URL). */
export type EngineFactory = (slot: InstanceSlot) => Promise<Engine>;

/**
 * The instances of one region. For `engines.kind: "sim"` each endpoint gets `instances` slots. For "openai-http"
 * the URLs under `engines.urls["region/model/gpu"]` go to that endpoint; those under `"region/model"` are dealt to
 * the model's remaining endpoints in order (`instances` each, the rest to the last). An endpoint left without a URL
 * is an invalid_config error naming engines.urls.
 */
export function instanceSlots(config: TidegateConfig, regionName: RegionName): InstanceSlot[] {
  const region = config.regions.find((r) => r.name === regionName);
  if (region === undefined) {
    throw new TidegateError("invalid_config", `unknown region ${JSON.stringify(regionName)}; the config has ${config.regions.map((r) => r.name).join(", ")}`);
  }
  const slots: InstanceSlot[] = [];
  const shared = new Map<ModelName, string[]>();
  region.endpoints.forEach((ep, j) => {
    let tp: number;
    try {
      tp = instanceGpus(config, ep.model, ep.gpu);
    } catch {
      throw new TidegateError("invalid_config", `regions[${regionName}].endpoints[${j}]: ${ep.model} has no gpusPerInstance for ${ep.gpu}`);
    }
    const slot = (i: number, url?: string): InstanceSlot => ({
      region: regionName,
      model: ep.model,
      gpu: ep.gpu,
      tp,
      instanceId: `${regionName}/${ep.model}/${ep.gpu}/${i}`,
      ...(url === undefined ? {} : { url }),
    });
    if (config.engines.kind === "sim") {
      for (let i = 0; i < ep.instances; i++) slots.push(slot(i));
      return;
    }
    let urls = config.engines.urls[`${regionName}/${ep.model}/${ep.gpu}`];
    if (urls === undefined) {
      if (!shared.has(ep.model)) shared.set(ep.model, [...(config.engines.urls[`${regionName}/${ep.model}`] ?? [])]);
      const pool = shared.get(ep.model)!;
      const isLast = !region.endpoints.slice(j + 1).some((e) => e.model === ep.model && config.engines.urls[`${regionName}/${e.model}/${e.gpu}`] === undefined);
      urls = isLast ? pool.splice(0) : pool.splice(0, Math.max(1, ep.instances));
    }
    if (urls.length === 0) {
      throw new TidegateError("invalid_config", `engines.urls: no URL for ${regionName}/${ep.model}/${ep.gpu} (give "${regionName}/${ep.model}/${ep.gpu}" or more under "${regionName}/${ep.model}")`);
    }
    urls.forEach((u, i) => slots.push(slot(i, u)));
  });
  return slots;
}

export interface StaticActuatorOptions {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  gateway: Gateway;
  engines: EngineFactory;
}

const MAX_FAILURES = 50;

/** A region's fixed engines as a RuntimeActuator that refuses every scaling step. */
export class StaticActuator implements RuntimeActuator {
  readonly kind = "static";
  readonly fixed = true;
  readonly region: RegionName;
  private readonly slots: InstanceSlot[];
  private readonly made = new Map<string, Engine>();
  private readonly enteredAtMs = new Map<string, number>();
  private readonly failures: ScaleFailure[] = [];
  private started: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly o: StaticActuatorOptions) {
    this.region = o.region;
    this.slots = instanceSlots(o.config, o.region);
    const now = o.clock.now();
    for (const s of this.slots) this.enteredAtMs.set(s.instanceId, now);
  }

  /**
   * Makes every slot's engine and adds it to the gateway as serving. If one fails, closes the engines made and
   * rejects with its error (the region does not start half-built). Idempotent.
   */
  start(): Promise<void> {
    return (this.started ??= (async () => {
      const made = await Promise.allSettled(this.slots.map((s) => this.o.engines(s)));
      const failed = made.find((m): m is PromiseRejectedResult => m.status === "rejected");
      if (failed !== undefined || this.closed) {
        await Promise.all(made.map((m) => (m.status === "fulfilled" ? m.value.close() : undefined)));
        if (failed !== undefined) throw failed.reason;
        return;
      }
      const now = this.o.clock.now();
      made.forEach((m, i) => {
        const slot = this.slots[i]!;
        const engine = (m as PromiseFulfilledResult<Engine>).value;
        this.made.set(slot.instanceId, engine);
        this.enteredAtMs.set(slot.instanceId, now);
        this.o.gateway.addInstance(slot.gpu, engine, "serving");
      });
    })());
  }

  /** The engines made so far, in slot order (what the engine-health watch checks). */
  engines(): Engine[] {
    return this.slots.flatMap((s) => this.made.get(s.instanceId) ?? []);
  }

  instances(): readonly Readonly<InstanceRecord>[] {
    const states = new Map(this.o.gateway.instances().map((i) => [i.instanceId, i]));
    return this.slots.map((s) => {
      const g = states.get(s.instanceId);
      const state: InstanceState = g === undefined ? "provisioning" : g.state;
      return { id: s.instanceId, region: this.region, gpu: s.gpu, gpus: s.tp, model: s.model, state, enteredAtMs: g?.enteredAtMs ?? this.enteredAtMs.get(s.instanceId)! };
    });
  }

  freeGpus(_gpu: GpuType): number {
    return 0;
  }

  private refuse(what: string): never {
    throw new TidegateError("conflict", `region ${this.region} is static (controller.actuator "static", or fixed engines): its instances are the configured engines; it does not ${what}`);
  }

  provision(_model: ModelName, _gpu: GpuType, _gpus: number): InstanceRecord {
    return this.refuse("provision instances");
  }

  reclaimSpot(_instanceId: string): InstanceRecord {
    return this.refuse("reclaim spot instances");
  }

  redeploy(_instanceId: string, _model: ModelName, _gpus: number): InstanceRecord {
    return this.refuse("redeploy instances");
  }

  drainToSpot(_instanceId: string): InstanceRecord {
    return this.refuse("drain instances");
  }

  tick(): void {}

  listen(_hooks: ScalingHooks): void {}

  report(f: Omit<ScaleFailure, "atMs">): void {
    this.failures.push({ ...f, atMs: this.o.clock.now() });
    if (this.failures.length > MAX_FAILURES) this.failures.shift();
  }

  expectedScaleOutMs(_model: ModelName, _gpu: GpuType): number | undefined {
    return undefined;
  }

  listing(): { instances: ListedInstance[]; nodes: NodeListing[]; failures: ScaleFailure[] } {
    const urls = new Map(this.slots.map((s) => [s.instanceId, s.url]));
    const instances = this.instances().map((i): ListedInstance => {
      const url = urls.get(i.id);
      const detail = i.state === "provisioning" ? "starting engine" : i.state === "draining" ? "out of service: its engine does not answer (engine health)" : "fixed engine";
      return { ...i, node: "", detail, ...(url === undefined ? {} : { engine: { url } }) };
    });
    return { instances, nodes: [], failures: [...this.failures] };
  }

  close(): void {
    this.closed = true;
  }
}
