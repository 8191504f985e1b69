import { describe, expect, it } from "vitest";
import type { Clock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import type { AgentHandle, NodeAnnouncement } from "../../nodes/agent/handle.js";
import { NodeMembership } from "./node-membership.js";
import { NodeRegistry } from "./nodes.js";

describe("node membership", () => {
  it("a node is lost after lostAfterMs of silence in time the process was running, not through the process's own pauses", () => {
    let nowMs = 0;
    let pausedMs = 0;
    // A clock whose process was paused (or starved) `pausedMs` since any time asked about.
    const clock = { now: () => nowMs, pausedMs: () => pausedMs } as unknown as Clock;
    const nodes = new NodeRegistry();
    const lost: string[] = [];
    const m = new NodeMembership({ clock, log: silentLogger, lostAfterMs: 3000, nodes, copies: { syncStores: () => undefined, loseNode: () => [] }, fail: () => undefined, reconcileEngines: () => undefined, dropInstances: (id) => void lost.push(id) });
    const handle = { nodeId: "n0", close: () => undefined } as unknown as AgentHandle;
    m.announce(handle, { nodeId: "n0", gpuType: "h100-80gb", gpuSlots: 8, stores: [], engines: [] } as unknown as NodeAnnouncement);
    // 5 s later, 4 of them the process's own pause: 1 s of silence it could have noticed. Kept.
    nowMs = 5000;
    pausedMs = 4000;
    m.expire();
    expect(lost).toEqual([]);
    // 5 s of silence while the process ran: lost.
    pausedMs = 0;
    m.expire();
    expect(lost).toEqual(["n0"]);
  });
});
