/**
 * One region of the week replay, wired from the real parts: the region gateway (region/gateway, endpoint + JSQ
 * pick and telemetry), simulated engines (region/engines/sim, analytic callback API on the VirtualClock), the
 * simulated actuator (region/actuator) with its GPU-time ledger, and the region controller (region/controller)
 * running the selected strategy. The actuator's state changes drive the engines: an instance that starts serving
 * gets a fresh engine in the gateway; a draining one takes no new work and becomes spot when its engine is idle.
 */
import type { VirtualClock } from "../../core/clock.js";
import { MODEL_SPECS, kvBytesPerToken, type ModelName, type RegionName } from "../../core/models.js";
import type { Priority, RegionTelemetry } from "../../core/ports.js";
import { Ledger } from "../../region/actuator/ledger.js";
import type { InstanceRecord } from "../../region/actuator/port.js";
import { SimActuator } from "../../region/actuator/sim.js";
import { RegionController, type ControllerAction } from "../../region/controller/reconciler.js";
import { SimEngine } from "../../region/engines/sim/engine.js";
import { Gateway } from "../../region/gateway/gateway.js";
import type { BoundStrategy } from "../../region/strategies/registry.js";
import { seededRandom } from "../workload/rng.js";
import type { FleetSpec } from "./fleet.js";

/** Callbacks of one submitted request (virtual ms); called as methods, so one object per request suffices. */
export interface RequestHooks {
  onFirstToken(atMs: number): void;
  onDone(atMs: number): void;
}

const OBS_BUCKET_MS = 10_000;
const OBS_BUCKETS = 6;

export class ReplayRegion {
  readonly name: RegionName;
  readonly actuator: SimActuator;
  readonly gateway: Gateway;
  readonly controller: RegionController;
  readonly ledger = new Ledger();
  readonly actions: ControllerAction[] = [];
  /** Latest telemetry snapshot (refreshed by `telemetry()`). */
  last: RegionTelemetry | undefined;
  private readonly engines = new Map<string, SimEngine>();
  private readonly draining = new Set<string>();
  /** Per model: tokens received in rolling 10 s buckets (observed tokens/s for LT-UA). */
  private readonly obs = new Map<ModelName, { buckets: Float64Array; head: number; headStartMs: number }>();
  private nextReq = 0;
  /** Requests that could not be placed (no serving instance). */
  unplaced = 0;
  /** Requests whose prompt was cut to fit one instance's KV capacity. */
  clamped = 0;

  constructor(
    private readonly clock: VirtualClock,
    private readonly fleet: FleetSpec,
    regionIndex: number,
    strategy: BoundStrategy,
    seed: number,
  ) {
    const rc = fleet.config.regions[regionIndex]!;
    this.name = rc.name;
    this.gateway = new Gateway({ region: rc.name, clock });
    for (const e of rc.endpoints) this.gateway.addEndpoint(e.model, e.gpu);
    this.actuator = new SimActuator({
      region: rc.name,
      clock,
      delays: fleet.delays,
      capacity: Object.fromEntries(rc.gpus.map((g) => [g.type, g.count])),
      weightsInRegion: fleet.weights[rc.name] ?? [],
      random: seededRandom(seed, 1000 + regionIndex),
      drainDoneAtMs: (id) => (this.isIdle(id) ? clock.now() : undefined),
      onChange: (inst, from) => this.onChange(inst, from),
    });
    const gpusOf = (model: string, gpu: string) => fleet.config.models.find((m) => m.name === model)!.gpusPerInstance[gpu]!;
    for (const e of rc.endpoints) for (let i = 0; i < e.instances; i++) this.actuator.seed(e.model, e.gpu, gpusOf(e.model, e.gpu), "serving");
    for (const s of fleet.spot.filter((x) => x.region === rc.name)) for (let i = 0; i < s.count; i++) this.actuator.seed(s.model, s.gpu, gpusOf(s.model, s.gpu), "spot");
    for (const m of new Set(rc.endpoints.map((e) => e.model))) this.obs.set(m, { buckets: new Float64Array(OBS_BUCKETS), head: 0, headStartMs: 0 });
    this.controller = new RegionController({
      region: rc.name,
      clock,
      actuator: this.actuator,
      strategy,
      endpoints: rc.endpoints.map((e) => ({ model: e.model, gpu: e.gpu, gpusPerInstance: gpusOf(e.model, e.gpu), minInstances: e.minInstances, maxInstances: e.maxInstances })),
      signals: (model, gpu) => this.signals(model, gpu),
      inFlightTokens: (id) => this.engines.get(id)?.core.stats().remainingTokens ?? 0,
      windowMs: fleet.config.planner.intervalMs,
      onAction: (a) => this.actions.push(a),
    });
    // Plans reach the controller through the region's TargetsStore (the one decisionId rule), as live.
    this.gateway.targets.onTargets((t) => this.controller.setTargets(t));
  }

  /** KV bytes one instance of `model` offers (the router's in-flight correction). */
  instanceKvBytes(model: ModelName): number {
    const e = this.fleet.engines[model]!;
    return e.maxBatch * e.kvTokensPerSeq * kvBytesPerToken(MODEL_SPECS[model]!);
  }

  /**
   * Routes one request inside the region (gateway: endpoint by utilization, JSQ instance) and submits it to the
   * engine. Returns false when no instance of the model serves here.
   */
  submit(model: ModelName, promptTokens: number, outputTokens: number, priority: Priority, hooks: RequestHooks): boolean {
    const choice = this.gateway.route(model);
    if (choice === undefined) {
      this.unplaced++;
      return false;
    }
    const engine = this.engines.get(choice.instanceId)!;
    if (promptTokens + outputTokens > engine.core.capacityTokens) {
      this.clamped++;
      outputTokens = Math.min(outputTokens, engine.core.capacityTokens >> 1);
      promptTokens = engine.core.capacityTokens - outputTokens;
    }
    this.observe(model, promptTokens + outputTokens);
    engine.core.submit({ id: String(this.nextReq++), promptTokens, maxTokens: outputTokens, priority }, hooks);
    return true;
  }

  /**
   * Takes a telemetry snapshot through the gateway (SageServe §6.2 effective memory utilization), and hands
   * draining instances whose engine went idle back to spot (so drains finish within one telemetry period).
   */
  telemetry(): RegionTelemetry {
    for (const id of this.draining) if (this.isIdle(id)) this.actuator.finishDrain(id);
    this.last = this.gateway.snapshot();
    return this.last;
  }

  /** Observed tokens/s of a model over the last minute. */
  observedTokensPerS(model: ModelName): number {
    const o = this.obs.get(model);
    if (o === undefined) return 0;
    this.rotate(o);
    let s = 0;
    for (const b of o.buckets) s += b;
    return s / ((OBS_BUCKET_MS * OBS_BUCKETS) / 1000);
  }

  /** Instances of the region by model and state right now. */
  counts(): Map<ModelName, Record<InstanceRecord["state"], number>> {
    const out = new Map<ModelName, Record<InstanceRecord["state"], number>>();
    for (const i of this.actuator.instances()) {
      let c = out.get(i.model);
      if (c === undefined) out.set(i.model, (c = { provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 }));
      c[i.state]++;
    }
    return out;
  }

  private signals(model: ModelName, gpu: string): { utilization: number; observedTokensPerS: number } {
    const mt = this.last?.models.find((m) => m.model === model);
    const ep = mt?.endpoints.find((e) => e.gpu === gpu);
    return { utilization: ep === undefined || ep.servingInstances === 0 ? 1 : ep.effectiveMemoryUtilization, observedTokensPerS: this.observedTokensPerS(model) };
  }

  private observe(model: ModelName, tokens: number): void {
    const o = this.obs.get(model);
    if (o === undefined) return;
    this.rotate(o);
    o.buckets[o.head]! += tokens;
  }

  private rotate(o: { buckets: Float64Array; head: number; headStartMs: number }): void {
    const now = this.clock.now();
    let steps = Math.floor((now - o.headStartMs) / OBS_BUCKET_MS);
    if (steps <= 0) return;
    o.headStartMs += steps * OBS_BUCKET_MS;
    if (steps > OBS_BUCKETS) steps = OBS_BUCKETS;
    for (let i = 0; i < steps; i++) {
      o.head = (o.head + 1) % OBS_BUCKETS;
      o.buckets[o.head] = 0;
    }
  }

  private isIdle(id: string): boolean {
    const e = this.engines.get(id);
    if (e === undefined) return true;
    const s = e.core.stats();
    return s.running === 0 && s.waiting === 0;
  }

  private onChange(inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined): void {
    this.ledger.record(inst, this.clock.now(), from);
    if (inst.state === "serving") {
      const tp = this.fleet.config.models.find((m) => m.name === inst.model)!.gpusPerInstance[inst.gpu]!;
      const e = this.fleet.engines[inst.model]!;
      const engine = new SimEngine({ instanceId: inst.id, model: inst.model, gpu: inst.gpu, tp, clock: this.clock, maxBatch: e.maxBatch, kvCapacityTokens: e.maxBatch * e.kvTokensPerSeq });
      this.engines.set(inst.id, engine);
      this.gateway.addInstance(inst.gpu, engine, "serving");
    } else if (inst.state === "draining" && from === "serving") {
      this.gateway.setInstanceState(inst.id, "draining");
      this.draining.add(inst.id);
    } else if (inst.state === "spot" && this.engines.has(inst.id)) {
      this.draining.delete(inst.id);
      this.gateway.removeInstance(inst.id);
      void this.engines.get(inst.id)!.close();
      this.engines.delete(inst.id);
    }
  }
}
