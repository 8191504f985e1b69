/**
 * The engines a node's agent says it runs, set against the `agents` actuator's instances. On a node's first
 * announcement (a restarted region, or a node back after being lost) the region adopts the engines of its own
 * instances (ids `<region>/…`) instead of starting duplicates: health-checked, and an engine still waiting for
 * its blocks gets them again; it stops the ones it cannot adopt (a model the region no longer hosts, an engine that
 * never turns healthy). On every later announcement a serving instance whose engine the agent no longer runs, or
 * reports exited, is removed.
 */
import type { Clock } from "../../core/clock.js";
import { toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { EngineInfo, NodeAnnouncement } from "../../nodes/agent/handle.js";
import type { AgentInstance, InstanceTable } from "./agent-instances.js";
import type { PoolRole } from "./port.js";
import type { EngineLifecycle } from "./engine-lifecycle.js";
import type { HostCopies, ModelSource } from "./host-copies.js";
import type { NodeRegistry } from "./nodes.js";

export interface EngineAdoptionOptions {
  region: RegionName;
  clock: Clock;
  log: Logger;
  models: ReadonlyMap<ModelName, ModelSource>;
  /** SIGTERM → SIGKILL grace when an engine that cannot be adopted is stopped. */
  stopGraceMs: number;
  table: InstanceTable;
  copies: Pick<HostCopies, "pool" | "want">;
  nodes: Pick<NodeRegistry, "handle">;
  lifecycle: Pick<EngineLifecycle, "serveWhenHealthy" | "remove">;
}

export class EngineAdoption {
  constructor(private readonly o: EngineAdoptionOptions) {}

  /** Adopts the node's engines on its first announcement (`fresh`); later, drops instances whose engine is gone. */
  reconcile(nodeId: string, a: NodeAnnouncement, fresh: boolean): void {
    if (fresh) for (const e of a.engines) this.adopt(nodeId, e);
    else this.dropVanished(nodeId, a);
  }

  private adopt(nodeId: string, e: EngineInfo): void {
    const { table, copies } = this.o;
    if (!e.instanceId.startsWith(`${this.o.region}/`) || table.has(e.instanceId)) return;
    if (e.state === "exited") return;
    if (!this.o.models.has(e.model)) {
      void this.o.nodes.handle(nodeId)?.stopEngine(e.instanceId, this.o.stopGraceMs);
      return;
    }
    const now = this.o.clock.now();
    // In the pool it was started for from the first pass (the controller counts it there); serveWhenHealthy then
    // reads the role it serves with now (a switched one moves to its new pool).
    const role = e.role === "prefill" || e.role === "decode" ? { role: e.role as PoolRole } : {};
    const inst: AgentInstance = { id: e.instanceId, region: this.o.region, gpu: e.gpu, gpus: e.gpus, model: e.model, state: "provisioning", enteredAtMs: now, actionAtMs: now, node: nodeId, detail: "adopting a running engine", engine: e, ...role };
    table.add(inst);
    copies.pool.pin(nodeId, e.model, 1);
    this.o.log.info("adopting engine", { instanceId: e.instanceId, node: nodeId, url: e.url, pid: e.pid });
    void (async () => {
      // An engine started while its blocks were arriving, whose transfer died with the previous region process:
      // the blocks are asked for again (it turns healthy once they are all here).
      const params = this.o.models.get(e.model)!;
      if (copies.pool.copy(nodeId, e.model)?.complete !== true) {
        table.transition(inst, "loading", "adopted engine waits for blocks");
        await copies.want(params, nodeId);
      }
      // Back in the pool its engine serves (a prefill or decode role, perhaps switched since it started).
      await this.o.lifecycle.serveWhenHealthy(inst, true);
    })().catch((err: unknown) => {
      // Not adoptable (unhealthy): stop it rather than leave an orphan.
      this.o.lifecycle.remove(inst, `adoption failed: ${toTidegateError(err).message}`);
    });
  }

  private dropVanished(nodeId: string, a: NodeAnnouncement): void {
    for (const inst of this.o.table.onNode(nodeId)) {
      if (inst.state !== "serving" || inst.engine === undefined) continue;
      const e = a.engines.find((x) => x.instanceId === inst.id);
      if (e === undefined || e.state === "exited") this.o.lifecycle.remove(inst, `engine of ${inst.id} is no longer running on ${nodeId}${e?.detail ? `: ${e.detail}` : ""}`);
    }
  }
}
