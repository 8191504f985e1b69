/**
 * Nodes joining and leaving the `agents` actuator's region. Each agent announces itself every second (dev calls
 * `announce` directly): a new node is logged (and listed when it has no GPU slots), its stores update the parameter
 * pool and its engines are set against the instances (adoption.ts). A node silent for `lostAfterMs`, or dropped
 * with `lose`, is lost: its link rate and host copies are forgotten and its instances go (their bring-ups are
 * cancelled); the next `restoreInvariant` restores the pool from what remains.
 */
import { awakeMsSince, type Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { AgentHandle, NodeAnnouncement } from "../../nodes/agent/handle.js";
import type { HostCopies } from "./host-copies.js";
import type { NodeRegistry } from "./nodes.js";
import type { ScaleFailure } from "./port.js";

export interface NodeMembershipOptions {
  clock: Clock;
  log: Logger;
  /** A node silent this long is lost (ms). */
  lostAfterMs: number;
  nodes: NodeRegistry;
  copies: Pick<HostCopies, "syncStores" | "loseNode">;
  fail(f: Omit<ScaleFailure, "atMs">): void;
  /** The node's announced engines against the instances (`fresh`: its first announcement, or back after loss). */
  reconcileEngines(nodeId: string, a: NodeAnnouncement, fresh: boolean): void;
  /** Cancels and removes every instance on a lost node. */
  dropInstances(nodeId: string, why: string): void;
}

export class NodeMembership {
  constructor(private readonly o: NodeMembershipOptions) {}

  /** Takes an agent's announcement. */
  announce(handle: AgentHandle, a: NodeAnnouncement): void {
    const now = this.o.clock.now();
    const { fresh, entry } = this.o.nodes.announce(handle, a, now);
    if (fresh) {
      this.o.log.info("node joined", { node: a.nodeId, gpuType: a.gpuType, gpuSlots: a.gpuSlots, memoryBytes: a.memoryBytes, data: `${a.dataHost}:${a.dataPort}`, transport: a.transport });
      if (a.gpuSlots <= 0) this.o.fail({ model: "-", gpu: a.gpuType, node: a.nodeId, message: `agent ${a.nodeId} announces no GPU slots; it can hold parameter blocks but host no engine` });
    }
    this.o.copies.syncStores(a, now);
    this.o.reconcileEngines(entry.nodeId, a, fresh);
  }

  /**
   * Marks nodes silent for `lostAfterMs` lost, the silence measured in time this process was running (awakeMsSince,
   * issue 49 item 3): an in-process agent (`tidegate dev`) cannot announce while the process itself is paused or
   * starved, and that is not the node's fault — under a loaded CI box dev lost all its nodes at start-up and never
   * got its instances back.
   */
  expire(): void {
    const clock = this.o.clock;
    for (const n of this.o.nodes.expire(clock.now(), this.o.lostAfterMs, (since) => awakeMsSince(clock, since))) this.lose(n.nodeId, `no announcement for ${this.o.lostAfterMs} ms`);
  }

  /** Drops a node now (its agent is gone). */
  lose(nodeId: string, why: string): void {
    this.o.nodes.markLost(nodeId);
    const models = this.o.copies.loseNode(nodeId);
    this.o.log.warn("node lost", { node: nodeId, why, copiesLost: models });
    this.o.dropInstances(nodeId, why);
  }
}
