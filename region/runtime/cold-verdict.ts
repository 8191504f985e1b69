/**
 * Why a model at zero is not coming up in a region (issue 50), and whether its held requests should hear it now
 * rather than wait out the hold. After each controller pass the region runtime asks, for every model it holds
 * requests for with nothing of it serving, provisioning or loading: did every endpoint of the model fail to start an
 * instance, and why?
 *
 * - `no_capacity`: the controller is blocked for want of GPUs (no spot instance to reclaim or redeploy, too few free
 *   GPUs; region/spot `chooseScaleOut` "no-capacity");
 * - `not_placed`: the endpoint allows no instance (at its maximum, `maxInstances` 0), or the actuator refused the
 *   step at once (no node can take the instance: none with enough free slots, none of that GPU type) and the
 *   endpoint is backed off;
 * - `cold_start_failed`: the actuator accepted a scale-out that failed later (a transfer, an engine that exited or
 *   never became healthy) and the endpoint is backed off.
 *
 * A reason for every endpoint refuses the held requests at once (503 with the reason; the router tries the next
 * region, then adds Retry-After) — except no capacity while the idle drain is on (`controller.scaleToZero.idleMs` >
 * 0): other models' idle instances give their GPUs back by themselves, so the requests stay held, and a hold that
 * runs out says no capacity. An endpoint with no reason (its step was taken, or not tried this pass) keeps them held.
 * Pure except for `ColdVerdicts`, the books one runtime keeps of the controller's reports between passes.
 */
import type { GpuType, ModelName } from "../../core/models.js";
import type { InstanceState, PoolRole } from "../../core/ports.js";
import { poolKey } from "../actuator/port.js";
import type { ColdHold, ColdReason } from "../gateway/cold-hold.js";

/** What one endpoint of a model at zero reported at the last pass. */
export interface EndpointAtZero {
  model: ModelName;
  gpu: GpuType;
  /** The controller found nowhere to put an instance this pass (its onBlocked). */
  blocked?: { reason: string; freeGpus: number; gpusPerInstance: number; maxInstances: number };
  /** Its scale-outs are backed off now after this failure (its last, with the controller's kind). */
  backoff?: { kind: "refused" | "failed"; message: string; retryInMs: number };
}

/** The reason of one endpoint, or undefined when it gave none (its scale-out was taken or not tried). */
export function endpointReason(e: EndpointAtZero): ColdReason | undefined {
  const name = `${e.model}/${e.gpu}`;
  if (e.blocked !== undefined) {
    if (e.blocked.reason === "at-max") return { code: "not_placed", detail: `${name} allows no instance (maxInstances ${e.blocked.maxInstances})` };
    return { code: "no_capacity", detail: `${name}: no free GPU for an instance (needs ${e.blocked.gpusPerInstance} ${e.gpu}, ${e.blocked.freeGpus} free; no spot instance to reclaim or redeploy)` };
  }
  if (e.backoff !== undefined) {
    const retry = `next try in ${Math.ceil(e.backoff.retryInMs / 1000)} s`;
    if (e.backoff.kind === "refused") return { code: "not_placed", detail: `${name}: no place for an instance (${e.backoff.message}; ${retry})` };
    return { code: "cold_start_failed", detail: `${name}: its cold start failed (${e.backoff.message}; ${retry})` };
  }
  return undefined;
}

/**
 * The model's reason when every endpoint gave one (the first endpoint's code, every endpoint's words), and whether
 * its held requests are refused now (`refuseNow`: not while the idle drain may free GPUs for a no-capacity endpoint).
 * Undefined when some endpoint gave none, or the model has no endpoint.
 */
export function modelReason(endpoints: readonly EndpointAtZero[], idleDrain: boolean): (ColdReason & { refuseNow: boolean }) | undefined {
  const reasons: ColdReason[] = [];
  for (const e of endpoints) {
    const r = endpointReason(e);
    if (r === undefined) return undefined;
    reasons.push(r);
  }
  if (reasons.length === 0) return undefined;
  const waitForGpus = idleDrain && reasons.some((r) => r.code === "no_capacity");
  return { code: reasons[0]!.code, detail: reasons.map((r) => r.detail).join("; "), refuseNow: !waitForGpus };
}

/** What `ColdVerdicts` reads of the region: its endpoints and the controller's backoff. */
export interface ColdVerdictsOptions {
  /** Each endpoint; a disaggregated model's pools (`role`) are endpoints of their own. */
  endpoints: readonly { model: ModelName; gpu: GpuType; role?: PoolRole; gpusPerInstance: number; maxInstances: number }[];
  backoffOf(model: ModelName, gpu: GpuType, role?: PoolRole): { retryAtMs: number } | undefined;
}

/**
 * The books between passes: the controller's blocked reports of the current pass (`beginPass` clears them) and each
 * endpoint's last failure (kept until an instance of it lands). `reason(model, nowMs)` reads them as above.
 */
export class ColdVerdicts {
  private readonly blockedNow = new Map<string, { reason: string; freeGpus: number }>();
  private readonly lastFailure = new Map<string, { kind: "refused" | "failed"; message: string }>();

  constructor(private readonly o: ColdVerdictsOptions) {}

  beginPass(): void {
    this.blockedNow.clear();
  }

  /** The controller's onBlocked (this pass). */
  blocked(model: ModelName, gpu: GpuType, reason: string, freeGpus: number, role?: PoolRole): void {
    this.blockedNow.set(poolKey(model, gpu, role), { reason, freeGpus });
  }

  /** The controller's onError: a scale-out refused at once or failed later. */
  failed(model: ModelName, gpu: GpuType, kind: "refused" | "failed", message: string, role?: PoolRole): void {
    this.lastFailure.set(poolKey(model, gpu, role), { kind, message });
  }

  /** An instance of (model, gpu) (its `role` pool) landed: its failures are over. */
  landed(model: ModelName, gpu: GpuType, role?: PoolRole): void {
    this.lastFailure.delete(poolKey(model, gpu, role));
  }

  /** Why `model` is not coming up after this pass (modelReason), from each of its endpoints' reports. */
  reason(model: ModelName, nowMs: number, idleDrain: boolean): (ColdReason & { refuseNow: boolean }) | undefined {
    const facts: EndpointAtZero[] = [];
    for (const e of this.o.endpoints) {
      if (e.model !== model) continue;
      const key = poolKey(e.model, e.gpu, e.role);
      const b = this.blockedNow.get(key);
      const f = this.lastFailure.get(key);
      const retryAtMs = this.o.backoffOf(e.model, e.gpu, e.role)?.retryAtMs;
      facts.push({
        model: e.model,
        gpu: e.gpu,
        ...(b === undefined ? {} : { blocked: { reason: b.reason, freeGpus: b.freeGpus, gpusPerInstance: e.gpusPerInstance, maxInstances: e.maxInstances } }),
        ...(f === undefined || retryAtMs === undefined || retryAtMs <= nowMs ? {} : { backoff: { ...f, retryInMs: retryAtMs - nowMs } }),
      });
    }
    return modelReason(facts, idleDrain);
  }

  /**
   * After a pass: for each of `models` with requests held in `hold` and no instance serving, provisioning or loading
   * in `instances`, notes why it is not coming up (the hold's timeout then says so) and refuses its held requests
   * now when `reason` says so. Returns the models refused, with their reason and how many requests.
   */
  judge(hold: ColdHold, models: ReadonlySet<ModelName>, instances: readonly { model: ModelName; state: InstanceState }[], nowMs: number, idleDrain: boolean): { model: ModelName; reason: ColdReason; refused: number }[] {
    const out: { model: ModelName; reason: ColdReason; refused: number }[] = [];
    let coming: Set<ModelName> | undefined;
    for (const model of models) {
      if (hold.held(model) === 0) continue;
      coming ??= new Set(instances.filter((i) => i.state === "serving" || i.state === "provisioning" || i.state === "loading").map((i) => i.model));
      const r = coming.has(model) ? undefined : this.reason(model, nowMs, idleDrain);
      const reason: ColdReason | undefined = r === undefined ? undefined : { code: r.code, detail: r.detail };
      hold.note(model, reason);
      if (reason !== undefined && r?.refuseNow === true) out.push({ model, reason, refused: hold.refuse(model, reason) });
    }
    return out;
  }
}
