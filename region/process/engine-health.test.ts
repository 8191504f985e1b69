/** The static region's engine-health watch (engine-health.ts) on a virtual clock and a stand-in gateway. */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { Engine, InstanceState } from "../../core/ports.js";
import type { Gateway } from "../gateway/gateway.js";
import { maxEjected, watchEngineHealth } from "./engine-health.js";

type Line = { level: string; msg: string; fields: Record<string, unknown> };

function logger(lines: Line[]): Logger {
  const at = (level: string) => (msg: string, fields: Record<string, unknown> = {}) => lines.push({ level, msg, fields });
  const l = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => l } as unknown as Logger;
  return l;
}

/** `n` engines whose health the test sets, in a gateway that only keeps instance states and which it believes down. */
function fleet(n: number) {
  const health = new Map<string, boolean | undefined>();
  const states = new Map<string, InstanceState>();
  /** Instances the gateway was told are down (engineDown, until engineUp), with their reason. */
  const believedDown = new Map<string, string>();
  const engines = Array.from({ length: n }, (_, i) => {
    const id = `e${i}`;
    states.set(id, "serving");
    health.set(id, true);
    return { instanceId: id, healthy: () => health.get(id), unhealthyReason: () => (health.get(id) === false ? "connection refused (ECONNREFUSED)" : undefined) } as unknown as Engine;
  });
  const gateway = {
    instances: () => [...states].map(([instanceId, state]) => ({ instanceId, state })),
    setInstanceState: (id: string, s: InstanceState) => states.set(id, s),
    engineDown: (id: string, reason: string) => {
      believedDown.set(id, reason);
      return 0;
    },
    engineUp: (id: string) => believedDown.delete(id),
  } as unknown as Pick<Gateway, "instances" | "setInstanceState" | "engineDown" | "engineUp">;
  return { health, states, engines, gateway, believedDown };
}

describe("engine-health watch", () => {
  it("caps ejections at maxEjectedPercent (at least one; 0: none)", () => {
    expect(maxEjected(4, 50)).toBe(2);
    expect(maxEjected(3, 50)).toBe(1);
    expect(maxEjected(1, 50)).toBe(1);
    expect(maxEjected(4, 100)).toBe(4);
    expect(maxEjected(4, 0)).toBe(0);
    expect(maxEjected(0, 50)).toBe(0);
    const f = fleet(1);
    expect(() => watchEngineHealth(f.gateway, f.engines, new VirtualClock(), logger([]), { maxEjectedPercent: 101 })).toThrow(RangeError);
  });

  it("takes unhealthy engines out up to the cap, keeps the rest serving with one warning each, and fills freed slots", () => {
    const clock = new VirtualClock(0);
    const lines: Line[] = [];
    const f = fleet(4);
    const w = watchEngineHealth(f.gateway, f.engines, clock, logger(lines), { intervalMs: 250, maxEjectedPercent: 50 });
    for (const id of ["e0", "e1", "e2"]) f.health.set(id, false);
    clock.advanceToSync(250);
    expect([...w.down]).toEqual(["e0", "e1"]);
    expect([...w.held]).toEqual(["e2"]);
    expect([...f.states.values()]).toEqual(["draining", "draining", "serving", "serving"]);
    clock.advanceToSync(1000); // no repeated warnings while nothing changes
    const warns = lines.filter((l) => l.level === "warn");
    expect(warns.map((l) => l.msg)).toEqual([
      "engine down; instance taken out of service",
      "engine down; instance taken out of service",
      "engine down but kept serving: the region's ejection cap is reached (it takes no request meanwhile)",
    ]);
    // The cap keeps e2 serving, not taking requests: the gateway believes all three down (issue 49 item 2).
    expect([...f.believedDown.keys()]).toEqual(["e0", "e1", "e2"]);
    expect(f.believedDown.get("e2")).toBe("connection refused (ECONNREFUSED)");
    expect(warns[0]!.fields).toMatchObject({ instanceId: "e0", reason: "connection refused (ECONNREFUSED)" });
    expect(warns[2]!.fields).toMatchObject({ instanceId: "e2", ejected: 2, maxEjected: 2, maxEjectedPercent: 50 });
    // e0 recovers: back in service, and its slot takes e2 out in the same pass.
    f.health.set("e0", true);
    clock.advanceToSync(1250);
    expect(f.states.get("e0")).toBe("serving");
    expect([...f.believedDown.keys()].sort()).toEqual(["e1", "e2"]);
    expect([...w.down].sort()).toEqual(["e1", "e2"]);
    expect(w.held.size).toBe(0);
    // Unknown (undefined) health neither ejects nor restores; instances drained by others are left alone.
    f.health.set("e1", undefined);
    f.states.set("e3", "draining");
    f.health.set("e3", true);
    clock.advanceToSync(1500);
    expect(f.states.get("e1")).toBe("draining");
    expect(f.states.get("e3")).toBe("draining");
    w.stop();
  });

  it("with maxEjectedPercent 0 never takes an engine out", () => {
    const clock = new VirtualClock(0);
    const f = fleet(2);
    const w = watchEngineHealth(f.gateway, f.engines, clock, logger([]), { maxEjectedPercent: 0 });
    f.health.set("e0", false);
    clock.advanceToSync(500);
    expect(f.states.get("e0")).toBe("serving");
    expect([...w.held]).toEqual(["e0"]);
    expect([...f.believedDown.keys()]).toEqual(["e0"]);
    w.stop();
  });
});
