/**
 * The nodes of a region as the `agents` actuator knows them: each node agent's latest announcement (GPU type and
 * slots, host memory for blocks, data-plane address, stores, engines), when it was last heard from, and whether it
 * is considered lost (silent for `lostAfterMs`). Slot accounting is done over the instances (node-placement.ts).
 */
import type { AgentHandle, NodeAnnouncement } from "../../nodes/agent/handle.js";

/** One node: its agent, what it last announced, when. */
export interface NodeEntry {
  nodeId: string;
  handle: AgentHandle;
  announcement: NodeAnnouncement;
  lastSeenAtMs: number;
  lost: boolean;
}

export class NodeRegistry {
  private readonly byId = new Map<string, NodeEntry>();

  /** Records an announcement; returns whether the node is new (or back after being lost). */
  announce(handle: AgentHandle, a: NodeAnnouncement, nowMs: number): { fresh: boolean; entry: NodeEntry } {
    const prev = this.byId.get(a.nodeId);
    if (prev !== undefined && prev.handle !== handle) prev.handle.close();
    const fresh = prev === undefined || prev.lost;
    const entry: NodeEntry = { nodeId: a.nodeId, handle, announcement: a, lastSeenAtMs: nowMs, lost: false };
    this.byId.set(a.nodeId, entry);
    return { fresh, entry };
  }

  /**
   * Nodes silent for longer than `lostAfterMs` that were live until now (they are marked lost). `silentMs` says how
   * long ago a time is (default: `nowMs` minus it; the membership passes the awake time, core/clock.ts awakeMsSince).
   */
  expire(nowMs: number, lostAfterMs: number, silentMs: (sinceMs: number) => number = (since) => nowMs - since): NodeEntry[] {
    const out: NodeEntry[] = [];
    for (const n of this.byId.values()) {
      if (!n.lost && silentMs(n.lastSeenAtMs) > lostAfterMs) {
        n.lost = true;
        out.push(n);
      }
    }
    return out;
  }

  /** Marks a node lost now (e.g. its agent's calls fail). Returns false when it was already lost or unknown. */
  markLost(nodeId: string): boolean {
    const n = this.byId.get(nodeId);
    if (n === undefined || n.lost) return false;
    n.lost = true;
    return true;
  }

  get(nodeId: string): NodeEntry | undefined {
    return this.byId.get(nodeId);
  }

  live(): NodeEntry[] {
    return [...this.byId.values()].filter((n) => !n.lost);
  }

  all(): NodeEntry[] {
    return [...this.byId.values()];
  }

  /** The live node's agent, or undefined. */
  handle(nodeId: string): AgentHandle | undefined {
    const n = this.byId.get(nodeId);
    return n === undefined || n.lost ? undefined : n.handle;
  }

  dataAddress(nodeId: string): { host: string; port: number } | undefined {
    const n = this.byId.get(nodeId);
    return n === undefined || n.lost ? undefined : { host: n.announcement.dataHost, port: n.announcement.dataPort };
  }

  close(): void {
    for (const n of this.byId.values()) n.handle.close();
    this.byId.clear();
  }
}
