/**
 * The region controller (STYLE "Reconcile, don't script"; SageServe §6.5). Desired state: the planner's latest
 * accepted targets for this region and the active strategy. Observed state: the actuator's instances by state
 * (provisioning, loading, serving, draining, spot) plus each endpoint's utilization and tokens/s. Each pass takes
 * at most one idempotent step per endpoint (reclaim / redeploy / provision / drain) toward the strategy's count.
 *
 * Each pass also folds the endpoint's utilization into an exponential moving average (`utilizationSmoothingMs`,
 * default 60 s) that LT-U/LT-UA act on; it is soft state, rebuilt from live signals after a restart.
 *
 * Likewise the strategy's per-endpoint state (`BoundStrategy.newState`, made on an endpoint's first pass and handed
 * to every `decide` of that endpoint; `reactive-hpa`'s metric samples, recommendation history and scale events) is
 * soft: a restart loses it, as Kubernetes' controller-manager loses its HPA recommendations, and the strategy starts
 * afresh from the observed world. Endpoints never share it.
 *
 * The controller keeps no other state of its own besides the plan it was handed (`setTargets`, from the region's
 * TargetsStore, which owns the one decisionId rule): in-flight work is visible as provisioning/loading instances and
 * cooldowns come from `actionAtMs` on the instances, so a controller killed at any point and restarted on the same
 * actuator (and handed the current plan) converges without double actions.
 *
 * Failures: an actuator operation that throws (no node with free GPUs, a bad engine command, …) or that fails later
 * (`noteFailure`, reported by the actuator's background work) puts that endpoint's scale-outs on an exponential
 * backoff (`retryInitialMs` doubling to `retryMaxMs`); scale-ins and other endpoints go on, and serving instances
 * are never touched because of a failed scale-out. A success (`noteSuccess`) clears the backoff.
 */
import type { Clock } from "../../core/clock.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { DemandStep, RegionTargets } from "../../core/ports.js";
import { poolKey, type Actuator, type InstanceRecord, type PoolRole } from "../actuator/port.js";
import { chooseScaleIn, chooseScaleOut } from "../spot/spot-pool.js";
import type { BoundStrategy } from "../strategies/strategy-registry.js";
import { applyZeroRule } from "./zero.js";

/**
 * One endpoint the controller manages: (model, GPU type) with its GPUs per instance and bounds; a disaggregated
 * model's prefill and decode pools are two endpoints of the same (model, GPU type), told apart by `role` (issue 48):
 * each has its own signals, strategy state, plan target, backoff and steps.
 */
export interface ManagedEndpoint {
  model: ModelName;
  gpu: GpuType;
  role?: PoolRole;
  gpusPerInstance: number;
  minInstances: number;
  maxInstances: number;
}

/** Live signals of one endpoint (from the gateway's telemetry or the replay engines). */
export interface EndpointSignals {
  utilization: number;
  observedTokensPerS: number;
}

/** The strategy's decision for one endpoint at one pass: the count it saw, the count it wants, why, on what utilization. */
export interface EndpointDecision {
  atMs: number;
  current: number;
  /** Serving instances (≤ current; the rest provisioning or loading). */
  serving: number;
  desired: number;
  reason: string;
  utilization: number;
}

/** A step the controller took, for reports and tests. */
export interface ControllerAction {
  atMs: number;
  region: RegionName;
  model: ModelName;
  gpu: GpuType;
  /** The pool of a disaggregated model; absent = colocated. */
  role?: PoolRole;
  /** "switch": a serving prefill instance moved to the decode pool (BlitzScale §5.2). */
  kind: "reclaim" | "redeploy" | "provision" | "drain" | "switch";
  instanceId: string;
  /** The strategy's reason (e.g. util-above, target, tail-above-forecast). */
  reason: string;
  from: number;
  desired: number;
}

export interface RegionControllerOptions {
  region: RegionName;
  clock: Clock;
  actuator: Actuator;
  strategy: BoundStrategy;
  endpoints: readonly ManagedEndpoint[];
  /** The endpoint's signals; a disaggregated pool's (`role`) are its role's load (region/runtime/pool-signals.ts). */
  signals(model: ModelName, gpu: GpuType, role?: PoolRole): EndpointSignals;
  /** Work still held by an instance (remaining tokens), to pick the cheapest one to drain. */
  inFlightTokens(instanceId: string): number;
  /** Length of the planner's decision window (ms); LT-UA's tail is its last 20 minutes. */
  windowMs: number;
  /**
   * The endpoint's expected scale-out time, decision to serving (the actuator's measured or ideal figure; undefined
   * when unknown): how far ahead of the forecast path `floorAhead` looks.
   */
  scaleOutMs?(model: ModelName, gpu: GpuType): number | undefined;
  /** Time constant of the smoothed utilization the LT strategies act on (ms; default 60 000; 0 = none). */
  utilizationSmoothingMs?: number;
  /**
   * Most steps one endpoint takes in one pass (default 1: SageServe's pacing, one instance at a time). A larger value
   * lets a strategy that jumps (LT-I, a burst) start every instance it wants in one pass, so their parameters move in
   * one multicast plan.
   */
  maxStepsPerPass?: number;
  /** Whether a decode pool short of instances switches a serving prefill instance first (trySwitch; default true). */
  pdSwitch?: boolean;
  /** First and largest delay before a failed endpoint's scale-out is tried again (default 1 000 / 60 000 ms). */
  retryInitialMs?: number;
  retryMaxMs?: number;
  /**
   * Scale to zero and back (zero.ts): endpoints with `minInstances` 0 of `models` come back from zero when the
   * gateway holds a request for them, and with `idleMs` > 0 drain their last instance after that long idle.
   * Absent: the strategy's count stands.
   */
  scaleToZero?: {
    /** The models the rule covers (the region's cold-held models); absent: every model. */
    models?: ReadonlySet<ModelName>;
    /** The idle drain's window (ms; 0: no idle drain, the last instance stays). */
    idleMs: number;
    /** Requests for `model` held at the gateway now, waiting for an instance (region/gateway/cold-hold.ts). */
    held(model: ModelName): number;
    /** Milliseconds since `model` last had a request in flight, held or entering (0 while it has one). */
    idleForMs(model: ModelName): number;
  };
  onAction?(a: ControllerAction): void;
  /** A step that failed (synchronously, or reported later through `noteFailure`), with the delay before the next try. */
  onError?(e: ControllerError): void;
  /** The strategy wants more instances and there is nowhere to put them (no spot, no free GPUs) or the max is reached. */
  onBlocked?(b: { atMs: number; model: ModelName; gpu: GpuType; role?: PoolRole; reason: string; current: number; desired: number; freeGpus: number }): void;
}

/** A failed scale step, for logs, metrics and the admin listing. */
export interface ControllerError {
  atMs: number;
  region: RegionName;
  model: ModelName;
  gpu: GpuType;
  role?: PoolRole;
  message: string;
  /** Consecutive failures of this endpoint. */
  failures: number;
  /** When the next scale-out of this endpoint may be tried (clock ms). */
  retryAtMs: number;
  /**
   * "refused": the actuator refused the step at once (no node can take the instance, …); "failed": it accepted a
   * scale-out that failed later (a transfer, an engine that never became healthy; `noteFailure`'s default).
   */
  kind: "refused" | "failed";
}

export class RegionController {
  private targets: RegionTargets | undefined;
  /** Per endpoint key (poolKey): consecutive failures and when a scale-out may be tried again. */
  private readonly backoff = new Map<string, { failures: number; retryAtMs: number }>();
  private readonly targetFor = new Map<string, { instances: number; floorInstances: number | undefined; floorSteps: readonly number[] | undefined; upperSteps: readonly number[] | undefined; demandSteps: readonly DemandStep[] | undefined; floorStepMs: number; forecastTokensPerS: number }>();
  /** Per endpoint (index into `o.endpoints`): smoothed utilization and when it was last updated. */
  private readonly smoothed: ({ value: number; atMs: number } | undefined)[] = [];
  /** Per endpoint (index into `o.endpoints`): the strategy's state, made on the endpoint's first pass. */
  private readonly strategyState: ({ state: unknown } | undefined)[] = [];
  /** Per endpoint (index into `o.endpoints`): the strategy's last decision, updated in place each pass. */
  private readonly decisions: (EndpointDecision | undefined)[] = [];
  /** model → gpu → [colocated, prefill, decode] index into `o.endpoints` (no string building on the per-pass scan). */
  private readonly endpointIndex = new Map<ModelName, Map<GpuType, (number | undefined)[]>>();

  constructor(private readonly o: RegionControllerOptions) {
    o.endpoints.forEach((e, k) => {
      let byGpu = this.endpointIndex.get(e.model);
      if (byGpu === undefined) this.endpointIndex.set(e.model, (byGpu = new Map()));
      let slots = byGpu.get(e.gpu);
      if (slots === undefined) byGpu.set(e.gpu, (slots = []));
      slots[roleSlot(e.role)] = k;
    });
  }

  private indexOf(model: ModelName, gpu: GpuType, role: PoolRole | undefined): number | undefined {
    return this.endpointIndex.get(model)?.get(gpu)?.[roleSlot(role)];
  }

  /** The decision id of the plan held (0 before any plan). */
  get decisionId(): number {
    return this.targets?.decisionId ?? 0;
  }

  /**
   * The plan to pace toward (the region's TargetsStore hands it over; it has already applied the decisionId rule and
   * never passes advisory plans). `undefined` forgets the plan (strategies then hold the current count).
   */
  setTargets(t: RegionTargets | undefined): void {
    this.targets = t;
    this.targetFor.clear();
    for (const e of t?.endpoints ?? []) this.targetFor.set(poolKey(e.model, e.gpu, e.role), { instances: e.instances, floorInstances: e.floorInstances, floorSteps: e.floorSteps, upperSteps: e.upperSteps, demandSteps: e.demandSteps, floorStepMs: e.floorStepMs ?? 0, forecastTokensPerS: e.forecastTokensPerS });
  }

  /**
   * Records a failed scale-out of (model, gpu) and backs its next try off exponentially. `kind`: "failed" (default)
   * when the actuator reports an accepted scale-out failed, "refused" when it refused the step (ControllerError).
   */
  noteFailure(model: ModelName, gpu: GpuType, message: string, kind: ControllerError["kind"] = "failed", role?: PoolRole): ControllerError {
    const key = poolKey(model, gpu, role);
    const now = this.o.clock.now();
    const prev = this.backoff.get(key);
    const failures = (prev?.failures ?? 0) + 1;
    const first = this.o.retryInitialMs ?? 1000;
    const delay = Math.min(this.o.retryMaxMs ?? 60_000, first * 2 ** (failures - 1));
    const b = { failures, retryAtMs: now + delay };
    this.backoff.set(key, b);
    const e: ControllerError = { atMs: now, region: this.o.region, model, gpu, ...(role === undefined ? {} : { role }), message, failures, retryAtMs: b.retryAtMs, kind };
    this.o.onError?.(e);
    return e;
  }

  /** Clears the backoff of (model, gpu) (its `role` pool) after a scale-out landed. */
  noteSuccess(model: ModelName, gpu: GpuType, role?: PoolRole): void {
    this.backoff.delete(poolKey(model, gpu, role));
  }

  /** The strategy's last decision for (model, gpu) (its `role` pool) (a copy); undefined before its first pass. */
  lastDecision(model: ModelName, gpu: GpuType, role?: PoolRole): EndpointDecision | undefined {
    const k = this.indexOf(model, gpu, role);
    const d = k === undefined ? undefined : this.decisions[k];
    return d === undefined ? undefined : { ...d };
  }

  /** The backoff of (model, gpu) (its `role` pool), if its last scale-out failed. */
  backoffOf(model: ModelName, gpu: GpuType, role?: PoolRole): { failures: number; retryAtMs: number } | undefined {
    return this.backoff.get(poolKey(model, gpu, role));
  }

  /** One pass: for every endpoint, compare desired with observed and take at most one step. Returns the steps. */
  reconcile(): ControllerAction[] {
    const now = this.o.clock.now();
    const all = this.o.actuator.instances();
    const actions: ControllerAction[] = [];
    // One pass over the world: per endpoint, instances that serve or will serve, serving ones, last action time.
    const n = this.o.endpoints.length;
    const currentOf = new Array<number>(n).fill(0);
    const servingOf = new Array<number>(n).fill(0);
    const lastOf = new Array<number | undefined>(n).fill(undefined);
    for (const i of all) {
      const k = this.indexOf(i.model, i.gpu, i.role);
      if (k === undefined) continue;
      if (i.state === "serving" || i.state === "provisioning" || i.state === "loading") currentOf[k]!++;
      if (i.state === "serving") servingOf[k]!++;
      const last = lastOf[k];
      if (i.actionAtMs !== undefined && (last === undefined || i.actionAtMs > last)) lastOf[k] = i.actionAtMs;
    }
    for (let k = 0; k < n; k++) {
      const ep = this.o.endpoints[k]!;
      const current = currentOf[k]!;
      const serving = servingOf[k]!;
      const lastActionMs = lastOf[k];
      const sig = this.o.signals(ep.model, ep.gpu, ep.role);
      const tgt = this.targetFor.get(poolKey(ep.model, ep.gpu, ep.role));
      const utilizationSmoothed = this.smooth(k, sig.utilization, now);
      const state = (this.strategyState[k] ??= { state: this.o.strategy.newState() }).state;
      const decided = this.o.strategy.decide({
        nowMs: now,
        windowStartMs: this.targets?.madeAtMs ?? 0,
        windowMs: this.o.windowMs,
        current,
        serving,
        target: this.o.strategy.usesForecast ? tgt?.instances : undefined,
        floor: this.o.strategy.usesForecast ? tgt?.floorInstances : undefined,
        floorAhead: this.o.strategy.usesForecast && tgt !== undefined ? this.stepsAhead(tgt.floorSteps, tgt.floorStepMs, ep, now) : undefined,
        upperAhead: this.o.strategy.usesForecast && tgt !== undefined ? this.stepsAhead(tgt.upperSteps, tgt.floorStepMs, ep, now) : undefined,
        forecastBand: this.o.strategy.usesForecast && tgt?.demandSteps !== undefined && tgt.demandSteps.length > 0 && tgt.floorStepMs > 0 ? { startMs: Math.floor((this.targets?.madeAtMs ?? now) / tgt.floorStepMs) * tgt.floorStepMs, stepMs: tgt.floorStepMs, steps: tgt.demandSteps } : undefined,
        scaleOutMs: this.o.strategy.usesForecast ? this.o.scaleOutMs?.(ep.model, ep.gpu) : undefined,
        utilization: sig.utilization,
        utilizationSmoothed,
        observedTokensPerS: sig.observedTokensPerS,
        forecastTokensPerS: tgt?.forecastTokensPerS ?? 0,
        minInstances: ep.minInstances,
        maxInstances: ep.maxInstances,
        lastActionMs,
      }, state);
      const last = (this.decisions[k] ??= { atMs: now, current, serving, desired: decided.desired, reason: decided.reason, utilization: sig.utilization });
      last.atMs = now;
      last.current = current;
      last.serving = serving;
      last.desired = decided.desired;
      last.reason = decided.reason;
      last.utilization = sig.utilization;
      const zero = this.o.scaleToZero;
      const decision = zero === undefined || ep.minInstances > 0 || zero.models?.has(ep.model) === false ? decided : applyZeroRule({ current, desired: decided.desired, reason: decided.reason, minInstances: ep.minInstances, held: zero.held(ep.model), idleForMs: zero.idleForMs(ep.model) }, zero.idleMs);
      const maxSteps = this.o.maxStepsPerPass ?? 1;
      let from = current;
      // A decode pool short of instances takes a serving prefill instance first (below).
      const switched = ep.role === "decode" && decision.desired > from ? this.trySwitch(ep, all, from, decision.desired, decision.reason, now) : undefined;
      if (switched !== undefined) {
        actions.push(switched);
        this.o.onAction?.(switched);
        from++;
      }
      for (let s = switched === undefined ? 0 : 1; s < maxSteps && decision.desired !== from; s++) {
        const a = this.tryStep(ep, from, decision.desired, decision.reason, now);
        if (a === undefined) break;
        actions.push(a);
        this.o.onAction?.(a);
        from += a.kind === "drain" ? -1 : 1;
      }
    }
    return actions;
  }

  /**
   * Exponential moving average of endpoint k's utilization with time constant τ: v += (u − v)(1 − e^(−Δt/τ)), so
   * irregular passes weigh time, not calls. The first sample starts it.
   */
  /**
   * The largest of a plan's forecast steps over [now, now + scale-out time] (TargetEndpoint.floorSteps or upperSteps;
   * step 0 is the step-aligned window holding the plan's madeAtMs, as the planner forecasts from it; past the last
   * step, the last one holds). Undefined when there are none.
   */
  private stepsAhead(steps: readonly number[] | undefined, stepMs: number, ep: ManagedEndpoint, now: number): number | undefined {
    if (steps === undefined || steps.length === 0 || stepMs <= 0) return undefined;
    const start = Math.floor((this.targets?.madeAtMs ?? now) / stepMs) * stepMs;
    const lead = Math.max(0, this.o.scaleOutMs?.(ep.model, ep.gpu) ?? 0);
    const last = steps.length - 1;
    const from = Math.min(last, Math.max(0, Math.floor((now - start) / stepMs)));
    const to = Math.min(last, Math.max(0, Math.floor((now + lead - start) / stepMs)));
    let most = 0;
    for (let k = from; k <= to; k++) most = Math.max(most, steps[k]!);
    return most;
  }

  private smooth(k: number, u: number, now: number): number {
    const tau = this.o.utilizationSmoothingMs ?? 60_000;
    if (!(tau > 0)) return u;
    const prev = this.smoothed[k];
    const value = prev === undefined ? u : prev.value + (u - prev.value) * (1 - Math.exp(-Math.max(0, now - prev.atMs) / tau));
    this.smoothed[k] = { value, atMs: now };
    return value;
  }

  /**
   * BlitzScale §5.2, live decode scale-out in P/D disaggregation: "we first switch a prefill instance to a decode
   * instance. At the same time, we scale multiple prefill instances to compensate for the loss". The switched instance
   * decodes at once (same parameters, nothing loads); the prefill pool, one short, scales out on its own signals at
   * its next decision. Only while the prefill pool keeps another serving instance, and where the actuator's engines can
   * switch; undefined when no switch was made.
   */
  private trySwitch(ep: ManagedEndpoint, all: readonly Readonly<InstanceRecord>[], current: number, desired: number, reason: string, now: number): ControllerAction | undefined {
    if (this.o.pdSwitch === false || this.o.actuator.switchRole === undefined || this.indexOf(ep.model, ep.gpu, "prefill") === undefined) return undefined;
    const b = this.backoff.get(poolKey(ep.model, ep.gpu, ep.role));
    if (b !== undefined && now < b.retryAtMs) return undefined;
    if (current >= ep.maxInstances) return undefined;
    const prefills = all.filter((i) => i.model === ep.model && i.gpu === ep.gpu && i.role === "prefill" && i.state === "serving");
    if (prefills.length < 2) return undefined;
    let pick = prefills[0]!;
    for (const i of prefills) if (this.o.inFlightTokens(i.id) < this.o.inFlightTokens(pick.id)) pick = i;
    try {
      const rec = this.o.actuator.switchRole(pick.id, "decode");
      return { atMs: now, region: this.o.region, model: ep.model, gpu: ep.gpu, role: "decode", kind: "switch", instanceId: rec.id, reason, from: current, desired };
    } catch (err) {
      this.o.onError?.({ atMs: now, region: this.o.region, model: ep.model, gpu: ep.gpu, role: "decode", message: err instanceof Error ? err.message : String(err), failures: 1, retryAtMs: now, kind: "refused" });
      return undefined;
    }
  }

  /** One step, with scale-outs held back while the endpoint is in backoff and failures turned into backoff. */
  private tryStep(ep: ManagedEndpoint, current: number, desired: number, reason: string, now: number): ControllerAction | undefined {
    if (desired > current) {
      const b = this.backoff.get(poolKey(ep.model, ep.gpu, ep.role));
      if (b !== undefined && now < b.retryAtMs) return undefined;
    }
    try {
      // Each step re-reads the world: the previous step of this pass changed it.
      return this.step(ep, this.o.actuator.instances(), current, desired, reason, now);
    } catch (err) {
      if (desired > current) this.noteFailure(ep.model, ep.gpu, err instanceof Error ? err.message : String(err), "refused", ep.role);
      else this.o.onError?.({ atMs: now, region: this.o.region, model: ep.model, gpu: ep.gpu, ...(ep.role === undefined ? {} : { role: ep.role }), message: err instanceof Error ? err.message : String(err), failures: 1, retryAtMs: now, kind: "refused" });
      return undefined;
    }
  }

  private step(ep: ManagedEndpoint, all: readonly Readonly<InstanceRecord>[], current: number, desired: number, reason: string, now: number): ControllerAction | undefined {
    const base = { atMs: now, region: this.o.region, model: ep.model, gpu: ep.gpu, ...(ep.role === undefined ? {} : { role: ep.role }), reason, from: current, desired };
    if (desired > current) {
      const holds = this.o.actuator.holdsBlocks === undefined ? undefined : (id: string, m: ModelName) => this.o.actuator.holdsBlocks!(id, m);
      const sole = this.o.actuator.soleCopies === undefined ? undefined : (id: string, m: ModelName) => this.o.actuator.soleCopies!(id, m);
      const c = chooseScaleOut(all, ep.model, ep.gpu, ep.gpusPerInstance, this.o.actuator.freeGpus(ep.gpu), ep.maxInstances, holds, sole, ep.role);
      if (c.kind === "reclaim") return { ...base, kind: "reclaim", instanceId: this.o.actuator.reclaimSpot(c.instanceId, ep.role).id };
      if (c.kind === "redeploy") return { ...base, kind: "redeploy", instanceId: this.o.actuator.redeploy(c.instanceId, ep.model, ep.gpusPerInstance, ep.role).id };
      if (c.kind === "provision") return { ...base, kind: "provision", instanceId: this.o.actuator.provision(ep.model, ep.gpu, ep.gpusPerInstance, ep.role).id };
      this.o.onBlocked?.({ atMs: now, model: ep.model, gpu: ep.gpu, ...(ep.role === undefined ? {} : { role: ep.role }), reason: c.reason, current, desired, freeGpus: this.o.actuator.freeGpus(ep.gpu) });
      return undefined;
    }
    if (desired < current) {
      const c = chooseScaleIn(all, ep.model, ep.gpu, ep.minInstances, this.o.inFlightTokens, ep.role);
      if (c.kind === "drain") return { ...base, kind: "drain", instanceId: this.o.actuator.drainToSpot(c.instanceId).id };
    }
    return undefined;
  }
}

/** An endpoint's slot in the index: colocated, prefill, decode. */
function roleSlot(role: PoolRole | undefined): number {
  return role === undefined ? 0 : role === "prefill" ? 1 : 2;
}
