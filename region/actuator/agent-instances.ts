/**
 * The `agents` actuator's instance table: every instance of the region with its node, what it is doing and its
 * engine, the cached array `instances()` hands out (rebuilt after a change), the cancel marks of bring-ups that a
 * drain or a lost node stopped, and the one place a state changes (`transition`), which tells the listener.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { InstanceState } from "../../core/ports.js";
import type { EngineInfo } from "../../nodes/agent/handle.js";
import type { InstanceListener, InstanceRecord, LoadSource } from "./port.js";

/** An instance with where it runs and what it is doing. */
export interface AgentInstance extends InstanceRecord {
  node: string;
  /** What it is doing now (e.g. "waiting for blocks", "starting engine"). */
  detail: string;
  /** The engine on the agent, once started. */
  engine?: EngineInfo;
  /** Where its parameters came from at its last bring-up (issue 33): its node's host copy, a peer, the origin. */
  loadSource?: LoadSource;
}

export interface InstanceTableOptions {
  region: RegionName;
  clock: Clock;
  /** Every state change, and every instance added (`from` undefined); not removals. */
  onChange?: InstanceListener;
  /** An instance left `loading` (it serves, fails or is cancelled); called before `onChange`. */
  onLeftLoading(instanceId: string): void;
}

export class InstanceTable {
  private readonly byId = new Map<string, AgentInstance>();
  private view: AgentInstance[] | undefined;
  /** Bring-ups to stop at their next step (a drain of a deploying instance, a lost node). */
  private readonly cancelled = new Set<string>();

  constructor(private readonly o: InstanceTableOptions) {}

  /** Every instance, any state; the array is the same until the next change (the port's contract). */
  list(): readonly AgentInstance[] {
    if (this.view === undefined) this.view = [...this.byId.values()];
    return this.view;
  }

  get(id: string): AgentInstance | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Whether `inst` is still the table's instance under its id (not removed, not renamed by a redeploy). */
  current(inst: AgentInstance): boolean {
    return this.byId.get(inst.id) === inst;
  }

  /** The instance `id` in `state`; `not_found` / `conflict` otherwise. */
  require(id: string, state: InstanceState): AgentInstance {
    const inst = this.byId.get(id);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${id} in ${this.o.region}`);
    if (inst.state !== state) throw new TidegateError("conflict", `instance ${id} is ${inst.state}, not ${state}`);
    return inst;
  }

  /** The instances on `nodeId` (a copy: safe to remove while iterating). */
  onNode(nodeId: string): AgentInstance[] {
    return [...this.byId.values()].filter((i) => i.node === nodeId);
  }

  /** Whether an instance on `nodeId` is loading (a transfer is filling the node's stores). */
  loadingOn(nodeId: string): boolean {
    return [...this.byId.values()].some((i) => i.node === nodeId && i.state === "loading");
  }

  /** Adds a new instance and tells the listener (`from` undefined). */
  add(inst: AgentInstance): void {
    this.byId.set(inst.id, inst);
    this.changed(inst, undefined);
  }

  /**
   * Lists `inst` under a new id naming `model` (`formerId`: the one it had). Only for a spot instance: it has no
   * engine, no gateway entry, no pairing and no pending cancel, so only this table knows its id.
   */
  rename(inst: AgentInstance, model: ModelName): void {
    this.byId.delete(inst.id);
    inst.formerId = inst.id;
    inst.id = this.mintId(inst.node, model);
    this.byId.set(inst.id, inst);
  }

  /** Takes `inst` out of the table (no listener call); false when it was no longer there. */
  delete(inst: AgentInstance): boolean {
    if (this.byId.get(inst.id) !== inst) return false;
    this.byId.delete(inst.id);
    // No bring-up is under way for a serving or spot instance: nothing will read its cancel mark.
    if (inst.state === "serving" || inst.state === "spot") this.cancelled.delete(inst.id);
    this.view = undefined;
    return true;
  }

  cancel(id: string): void {
    this.cancelled.add(id);
  }

  isCancelled(id: string): boolean {
    return this.cancelled.has(id);
  }

  /** Clears the cancel mark once the cancelled bring-up has handed its instance on. */
  clearCancel(id: string): void {
    this.cancelled.delete(id);
  }

  /** Moves `inst` to `to` now and tells the listener. */
  transition(inst: AgentInstance, to: InstanceState, detail: string): void {
    const from = inst.state;
    inst.state = to;
    inst.detail = detail;
    inst.enteredAtMs = this.o.clock.now();
    this.changed(inst, from);
  }

  /**
   * A new instance id, `<region>/<node>/<model>/<8 random letters and digits>` (e.g. `us-east/us-east-h100-80gb-0/llama3.2-3b/1f0c9a2b`):
   * it names the model the instance holds, so a redeploy mints a new one.
   */
  mintId(node: string, model: ModelName): string {
    return `${this.o.region}/${node}/${model}/${newId("").slice(-8)}`;
  }

  private changed(inst: AgentInstance, from: InstanceState | undefined): void {
    this.view = undefined;
    if (from === "loading" && inst.state !== "loading") this.o.onLeftLoading(inst.id);
    this.o.onChange?.(inst, from);
  }
}
