/**
 * The simulated Actuator adapter. Delays come from `ActuatorDelays` (SageServe §7.1): spot ↔ internal median 1 min,
 * max 5 min (log-normal around the median, capped); redeploy with weights in the region ~10 min; weights from
 * another region ~2 h; a fresh VM adds `vmProvisionMs` before the model load. Time comes from a Clock, randomness
 * from a seeded generator, so runs are reproducible. Instances in provisioning/loading hold GPUs (GPU time spent)
 * and do not serve. Draining instances become spot when `drainDoneAtMs` (a hook the engine layer provides) says
 * their last request finished.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { InstanceState, PoolRole } from "../../core/ports.js";
import { poolKey, setRole, type InstanceListener, type InstanceRecord, type ListedInstance, type NodeListing, type RuntimeActuator, type ScaleFailure, type ScalingHooks, type LoadSource } from "./port.js";

/** Delays in ms. `spotMedianMs`/`spotMaxMs`: spot ↔ internal; `redeployLocalMs`: weights in region; `redeployRemoteMs`: weights fetched from another region. */
export interface ActuatorDelays {
  spotMedianMs: number;
  spotMaxMs: number;
  /** Log-normal shape of the spot move time (σ of ln); 0 = always the median. */
  spotSigma: number;
  redeployLocalMs: number;
  redeployRemoteMs: number;
  vmProvisionMs: number;
  /**
   * Whether a spot instance keeps its model deployed (SageServe §3.4: "switching an instance from private to spot,
   * and the reverse, is relatively fast"), so a reclaim is only the spot move. false: the spot work took the VM, and
   * a reclaim is a redeploy of the model (the spot move, then `redeployLocalMs`/`redeployRemoteMs`; with a loading
   * source, its load). Absent = true.
   */
  spotKeepsModel?: boolean;
}

/** SageServe §7.1 values. */
export const SAGESERVE_DELAYS: ActuatorDelays = {
  spotMedianMs: 60_000,
  spotMaxMs: 300_000,
  spotSigma: 0.6,
  redeployLocalMs: 600_000,
  redeployRemoteMs: 7_200_000,
  vmProvisionMs: 300_000,
};

export interface SimActuatorOptions {
  region: RegionName;
  clock: Clock;
  delays: ActuatorDelays;
  /** GPUs per type in the region. */
  capacity: Record<GpuType, number>;
  /** Models whose weights are stored in this region (a redeploy of any other model takes `redeployRemoteMs`). */
  weightsInRegion: readonly ModelName[];
  /** Deterministic uniform [0, 1) source. */
  random: () => number;
  /**
   * When a draining instance's last in-flight request finishes (clock ms); default: now. Returning undefined means
   * "not known yet": the instance stays draining until the engine layer calls `finishDrain(id)`.
   */
  drainDoneAtMs?: (instanceId: string) => number | undefined;
  onChange?: InstanceListener;
  /**
   * Where a loading instance's parameters come from (issue 12): when set, every load (a fresh VM after its
   * provisioning delay, a spot reclaim or a redeploy after the spot move) takes the time this says instead of the
   * configured `redeployLocalMs`/`redeployRemoteMs`, and a spot instance no longer keeps its weights on the GPU.
   * Loads that start at the same instant for the same (model, gpu) are one scale-out: one call, one multicast plan.
   */
  loading?: ActuatorLoading;
}

/** The loading source as the actuator sees it (region/runtime/sim-region.ts implements it over region/liveload). */
export interface ActuatorLoading {
  /** Starts loading `model` onto `targets` (all in state loading) now; returns each one's time to serve, ms from now. */
  begin(model: ModelName, gpu: GpuType, targets: readonly Readonly<InstanceRecord>[]): number[];
  /** The expected time a scale-out of one instance would take now (ms), for the planner and the controller. */
  expectedLoadMs(model: ModelName, gpu: GpuType): number;
  /** Where instance `id`'s last load took its parameters from (issue 33), once `begin` ran for it. */
  sourceOf?(id: string): LoadSource | undefined;
  /** Whether instance `id`'s host memory holds `model` (a load there needs no transfer between hosts). */
  holdsCopy?(id: string, model: ModelName): boolean;
  /** How many models other than `except` have their only host copy on host `id` (ActuatorPort.soleCopies). */
  soleCopies?(id: string, except: ModelName): number;
}

/** Samples the spot move time: median × exp(σ·Z), clipped to [median/5, max]. */
export function sampleSpotMs(d: ActuatorDelays, random: () => number): number {
  const u1 = Math.max(random(), 1e-12);
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * random());
  return Math.min(d.spotMaxMs, Math.max(d.spotMedianMs / 5, d.spotMedianMs * Math.exp(d.spotSigma * z)));
}

const MAX_FAILURES = 50;

export class SimActuator implements RuntimeActuator {
  readonly kind = "sim";
  readonly region: RegionName;
  private hooks: ScalingHooks = {};
  private readonly failures: ScaleFailure[] = [];
  private closed = false;
  private readonly byId = new Map<string, InstanceRecord>();
  private readonly timers = new Map<string, Timer>();
  private nextId = 0;
  private view: InstanceRecord[] | undefined;
  /** Loads starting at this instant, per model/gpu (ActuatorLoading: one scale-out per instant). */
  private pendingLoads = new Map<string, InstanceRecord[]>();
  /** `model/gpu` of every spot instance (expectedScaleOutMs, read every telemetry); rebuilt after a state change. */
  private spotKeys: Set<string> | undefined;
  /** Bumped at every state change (RuntimeActuator.version). */
  version = 0;
  /** Number of operations started (for tests: "no double actions"). */
  operations = 0;

  constructor(private readonly o: SimActuatorOptions) {
    this.region = o.region;
    for (const [gpu, n] of Object.entries(o.capacity)) {
      if (!Number.isInteger(n) || n <= 0) throw new TidegateError("invalid_config", `actuator ${o.region}: capacity of ${gpu} must be a positive integer, got ${n}`);
    }
  }

  /** Seeds an instance directly in `state` (fleet start-up); not an operation. */
  seed(model: ModelName, gpu: GpuType, gpus: number, state: "serving" | "spot", role?: PoolRole): InstanceRecord {
    this.checkGpus(gpu, gpus);
    const inst: InstanceRecord = { id: `${this.region}/${gpu}/${this.nextId++}`, region: this.region, gpu, gpus, model, state, enteredAtMs: this.o.clock.now(), ...(role === undefined ? {} : { role }) };
    this.byId.set(inst.id, inst);
    this.view = undefined;
    this.spotKeys = undefined;
    this.version++;
    this.o.onChange?.(inst, undefined);
    return { ...inst };
  }

  instances(): readonly Readonly<InstanceRecord>[] {
    if (this.view === undefined) this.view = [...this.byId.values()];
    return this.view;
  }

  /** The live record (no copy), for hot paths that only read. */
  get(id: string): Readonly<InstanceRecord> | undefined {
    return this.byId.get(id);
  }

  freeGpus(gpu: GpuType): number {
    let used = 0;
    for (const i of this.byId.values()) if (i.gpu === gpu) used += i.gpus;
    return (this.o.capacity[gpu] ?? 0) - used;
  }

  provision(model: ModelName, gpu: GpuType, gpus: number, role?: PoolRole): InstanceRecord {
    this.checkGpus(gpu, gpus);
    const inst: InstanceRecord = { id: `${this.region}/${gpu}/${this.nextId++}`, region: this.region, gpu, gpus, model, state: "provisioning", enteredAtMs: this.o.clock.now(), actionAtMs: this.o.clock.now(), via: "vm", ...(role === undefined ? {} : { role }) };
    this.byId.set(inst.id, inst);
    this.view = undefined;
    this.version++;
    this.operations++;
    this.o.onChange?.(inst, undefined);
    const loadMs = this.expectedLoad(model, gpu);
    inst.readyAtMs = inst.enteredAtMs + this.o.delays.vmProvisionMs + loadMs;
    this.schedule(inst.id, this.o.delays.vmProvisionMs, () => {
      this.transition(inst, "loading");
      this.startLoad(inst, loadMs);
    });
    return { ...inst };
  }

  reclaimSpot(instanceId: string, role?: PoolRole): InstanceRecord {
    const inst = this.require(instanceId, "spot");
    const ms = sampleSpotMs(this.o.delays, this.o.random);
    this.operations++;
    setRole(inst, role);
    inst.via = "reclaim";
    inst.actionAtMs = this.o.clock.now();
    this.transition(inst, "provisioning");
    if (this.o.loading !== undefined) {
      // the GPU gave its weights up to the spot work: the spot move, then a load from the loading source
      const loadMs = this.o.loading.expectedLoadMs(inst.model, inst.gpu);
      inst.readyAtMs = inst.enteredAtMs + ms + loadMs;
      this.schedule(inst.id, ms, () => {
        this.transition(inst, "loading");
        this.startLoad(inst, loadMs);
      });
      return { ...inst };
    }
    const total = this.o.delays.spotKeepsModel === false ? ms + this.loadMs(inst.model) : ms;
    inst.readyAtMs = inst.enteredAtMs + total;
    this.schedule(inst.id, total, () => this.transition(inst, "serving"));
    return { ...inst };
  }

  redeploy(instanceId: string, model: ModelName, gpus: number, role?: PoolRole): InstanceRecord {
    const inst = this.require(instanceId, "spot");
    if (gpus !== inst.gpus) throw new TidegateError("conflict", `instance ${instanceId} holds ${inst.gpus} GPUs; ${model} needs ${gpus}`);
    const spotMs = sampleSpotMs(this.o.delays, this.o.random);
    this.operations++;
    setRole(inst, role);
    inst.via = this.o.weightsInRegion.includes(model) ? "redeploy-local" : "redeploy-remote";
    inst.model = model;
    inst.actionAtMs = this.o.clock.now();
    if (this.o.loading !== undefined) {
      this.transition(inst, "provisioning");
      const loadMs = this.o.loading.expectedLoadMs(model, inst.gpu);
      inst.readyAtMs = inst.enteredAtMs + spotMs + loadMs;
      this.schedule(inst.id, spotMs, () => {
        this.transition(inst, "loading");
        this.startLoad(inst, loadMs);
      });
      return { ...inst };
    }
    const ms = spotMs + this.loadMs(model);
    this.transition(inst, "loading");
    inst.readyAtMs = inst.enteredAtMs + ms;
    this.schedule(inst.id, ms, () => this.transition(inst, "serving"));
    return { ...inst };
  }

  /** Actuator.switchRole: the record's pool changes now; the host's listener (sim-region.ts) switches its engine. */
  switchRole(instanceId: string, role: PoolRole): InstanceRecord {
    const inst = this.require(instanceId, "serving");
    if (inst.role === undefined) throw new TidegateError("conflict", `instance ${instanceId} is colocated: only a prefill or decode instance switches`);
    this.operations++;
    inst.role = role;
    inst.actionAtMs = this.o.clock.now();
    this.version++;
    this.view = undefined;
    this.o.onChange?.(inst, "serving");
    return { ...inst };
  }

  drainToSpot(instanceId: string): InstanceRecord {
    const inst = this.byId.get(instanceId);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${instanceId} in ${this.region}`);
    if (inst.state === "draining" || inst.state === "spot") throw new TidegateError("conflict", `instance ${instanceId} is already ${inst.state}`);
    this.operations++;
    this.timers.get(inst.id)?.cancel();
    const wasServing = inst.state === "serving";
    inst.via = "drain";
    inst.actionAtMs = this.o.clock.now();
    this.transition(inst, "draining");
    delete inst.readyAtMs;
    const doneAt = wasServing ? (this.o.drainDoneAtMs === undefined ? inst.enteredAtMs : this.o.drainDoneAtMs(inst.id)) : inst.enteredAtMs;
    if (doneAt !== undefined) this.schedule(inst.id, Math.max(0, doneAt - inst.enteredAtMs), () => this.transition(inst, "spot"));
    return { ...inst };
  }

  /**
   * Whether instance `instanceId`'s host holds `model` in memory (the loading source says; false without one): the
   * controller then redeploys that spot instance first (region/spot chooseScaleOut), as it does over agents.
   */
  holdsBlocks(instanceId: string, model: ModelName): boolean {
    return this.o.loading?.holdsCopy?.(instanceId, model) ?? false;
  }

  /** How many other models' only host copy instance `instanceId`'s host holds (the loading source says; 0 without one). */
  soleCopies(instanceId: string, except: ModelName): number {
    return this.o.loading?.soleCopies?.(instanceId, except) ?? 0;
  }

  /** Nothing to keep up: no nodes to lose, no parameter pool (delays stand for the data plane). */
  tick(): void {}

  listen(hooks: ScalingHooks): void {
    this.hooks = hooks;
  }

  report(f: Omit<ScaleFailure, "atMs">): void {
    this.failures.push({ atMs: this.o.clock.now(), ...f });
    if (this.failures.length > MAX_FAILURES) this.failures.shift();
  }

  /**
   * The configured delay of the fastest scale-out the region could start now: a spot instance that still holds
   * the model (median spot move), else a fresh VM plus the model load (weights in the region or from another).
   */
  expectedScaleOutMs(model: ModelName, gpu: GpuType): number | undefined {
    if (this.spotKeys === undefined) {
      this.spotKeys = new Set();
      for (const i of this.byId.values()) if (i.state === "spot") this.spotKeys.add(`${i.model}/${i.gpu}`);
    }
    if (this.o.loading !== undefined) {
      const loadMs = this.o.loading.expectedLoadMs(model, gpu);
      return this.spotKeys.has(`${model}/${gpu}`) ? this.o.delays.spotMedianMs + loadMs : this.o.delays.vmProvisionMs + loadMs;
    }
    if (this.spotKeys.has(`${model}/${gpu}`)) return this.o.delays.spotMedianMs + (this.o.delays.spotKeepsModel === false ? this.loadMs(model) : 0);
    return this.o.delays.vmProvisionMs + this.loadMs(model);
  }

  listing(): { instances: ListedInstance[]; nodes: NodeListing[]; failures: ScaleFailure[] } {
    const detail = (i: InstanceRecord) => (i.readyAtMs === undefined ? (i.via === undefined ? "" : `via ${i.via}`) : `serving expected at ${Math.round(i.readyAtMs)} ms (via ${i.via ?? "seed"})`);
    return { instances: [...this.byId.values()].map((i) => ({ ...i, node: "", detail: detail(i) })), nodes: [], failures: [...this.failures] };
  }

  /** Cancels every pending state change. */
  close(): void {
    this.closed = true;
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
  }

  /** The engine layer reports that a draining instance holds no more work: it becomes spot now. No-op otherwise. */
  finishDrain(instanceId: string): void {
    const inst = this.byId.get(instanceId);
    if (inst === undefined || inst.state !== "draining") return;
    this.timers.get(inst.id)?.cancel();
    this.timers.delete(inst.id);
    this.transition(inst, "spot");
  }

  /** The load's expected duration when it starts (the configured delay, or the loading source's estimate). */
  private expectedLoad(model: ModelName, gpu: GpuType): number {
    return this.o.loading === undefined ? this.loadMs(model) : this.o.loading.expectedLoadMs(model, gpu);
  }

  /**
   * `inst` (now loading) starts its load: after `loadMs` with configured delays, or, with a loading source, as
   * part of the one scale-out of this instant for its (model, gpu), at the time the source gives.
   */
  private startLoad(inst: InstanceRecord, loadMs: number): void {
    const loading = this.o.loading;
    if (loading === undefined) {
      inst.readyAtMs = inst.enteredAtMs + loadMs;
      this.schedule(inst.id, loadMs, () => this.transition(inst, "serving"));
      return;
    }
    const key = poolKey(inst.model, inst.gpu, inst.role);
    const group = this.pendingLoads.get(key);
    if (group !== undefined) {
      group.push(inst);
      return;
    }
    this.pendingLoads.set(key, [inst]);
    // Zero delay: every load of this (model, gpu) started at this instant joins the same scale-out.
    this.o.clock.after(0, () => {
      const targets = (this.pendingLoads.get(key) ?? []).filter((i) => i.state === "loading");
      this.pendingLoads.delete(key);
      if (this.closed || targets.length === 0) return;
      const delays = loading.begin(targets[0]!.model, targets[0]!.gpu, targets);
      targets.forEach((t, i) => {
        const d = Math.max(0, delays[i] ?? loadMs);
        t.readyAtMs = this.o.clock.now() + d;
        this.schedule(t.id, d, () => this.transition(t, "serving"));
      });
    });
  }

  private loadMs(model: ModelName): number {
    return this.o.weightsInRegion.includes(model) ? this.o.delays.redeployLocalMs : this.o.delays.redeployRemoteMs;
  }

  private checkGpus(gpu: GpuType, gpus: number): void {
    if (!(gpus > 0)) throw new TidegateError("invalid_request", `gpus must be > 0, got ${gpus}`);
    if (this.freeGpus(gpu) < gpus) throw new TidegateError("conflict", `${this.region}: ${gpus} free ${gpu} GPUs needed, ${this.freeGpus(gpu)} free`);
  }

  private require(id: string, state: InstanceState): InstanceRecord {
    const inst = this.byId.get(id);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${id} in ${this.region}`);
    if (inst.state !== state) throw new TidegateError("conflict", `instance ${id} is ${inst.state}, not ${state}`);
    return inst;
  }

  private schedule(id: string, delayMs: number, fn: () => void): void {
    if (this.closed) return;
    this.timers.get(id)?.cancel();
    this.timers.set(id, this.o.clock.after(delayMs, () => {
      this.timers.delete(id);
      fn();
    }));
  }

  private transition(inst: InstanceRecord, to: InstanceState): void {
    const from = inst.state;
    this.spotKeys = undefined;
    this.version++;
    inst.state = to;
    inst.enteredAtMs = this.o.clock.now();
    if (to === "serving" || to === "spot") delete inst.readyAtMs;
    this.o.onChange?.(inst, from);
    if (to === "serving" && from !== undefined) this.hooks.onLanded?.(inst.model, inst.gpu, inst.id, this.o.loading?.sourceOf?.(inst.id));
  }
}
