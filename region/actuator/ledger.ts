/**
 * GPU-time accounting over actuator state changes: milliseconds each (model, state) held instances and GPUs, and
 * counts of operations by kind. Feed it every change (`SimActuatorOptions.onChange`) and call `closeAt` at the end.
 * Instance-hours "used" = provisioning + loading + serving + draining; "lost to provisioning" = provisioning +
 * loading (the instance holds GPUs and serves nothing); "donated" = spot.
 */
import type { ModelName } from "../../core/models.js";
import type { InstanceState } from "../../core/ports.js";
import type { InstanceRecord } from "./port.js";

interface Open {
  model: ModelName;
  state: InstanceState;
  openedAtMs: number;
  gpus: number;
}

/** Per-model totals in ms (instance-ms and GPU-ms) by state, and operation counts. */
export interface LedgerTotals {
  instanceMs: Record<InstanceState, number>;
  gpuMs: Record<InstanceState, number>;
  ops: { vm: number; reclaim: number; "redeploy-local": number; "redeploy-remote": number; drain: number };
}

function emptyTotals(): LedgerTotals {
  const z = () => ({ provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 });
  return { instanceMs: z(), gpuMs: z(), ops: { vm: 0, reclaim: 0, "redeploy-local": 0, "redeploy-remote": 0, drain: 0 } };
}

export class Ledger {
  private readonly open = new Map<string, Open>();
  readonly byModel = new Map<ModelName, LedgerTotals>();

  /** Records a state change of `inst` at `nowMs` (its previous span is charged to the model it held then). */
  record(inst: Readonly<InstanceRecord>, nowMs: number, from: InstanceState | undefined): void {
    // A redeploy that renamed the instance closes the span opened under its former id.
    const formerId = inst.formerId !== undefined && this.open.has(inst.formerId) ? inst.formerId : undefined;
    const prev = this.open.get(formerId ?? inst.id);
    if (prev !== undefined) this.charge(prev, nowMs);
    if (formerId !== undefined) this.open.delete(formerId);
    if (from !== undefined && inst.via !== undefined && (inst.state === "provisioning" || inst.state === "draining" || (inst.state === "loading" && from === "spot"))) {
      this.totals(inst.model).ops[inst.via]++;
    } else if (from === undefined && inst.state === "provisioning") this.totals(inst.model).ops.vm++;
    this.open.set(inst.id, { model: inst.model, state: inst.state, openedAtMs: nowMs, gpus: inst.gpus });
  }

  /** Charges every open span up to `nowMs` (call once at the end of a run; spans restart at `nowMs`). */
  closeAt(nowMs: number): void {
    for (const o of this.open.values()) {
      this.charge(o, nowMs);
      o.openedAtMs = nowMs;
    }
  }

  totals(model: ModelName): LedgerTotals {
    let t = this.byModel.get(model);
    if (t === undefined) this.byModel.set(model, (t = emptyTotals()));
    return t;
  }

  private charge(o: Open, nowMs: number): void {
    const ms = Math.max(0, nowMs - o.openedAtMs);
    const t = this.totals(o.model);
    t.instanceMs[o.state] += ms;
    t.gpuMs[o.state] += ms * o.gpus;
  }
}
