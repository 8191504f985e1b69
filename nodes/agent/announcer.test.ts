import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { createLogger } from "../../core/log.js";
import { Announcer } from "./announcer.js";
import type { NodeAnnouncement } from "./handle.js";
import type { AnnounceReply } from "./agent-registry.js";

const node: NodeAnnouncement = { nodeId: "n1", dataHost: "h", dataPort: 1, transport: "tcp", fallback: "", memoryBytes: 1, grpcAddress: "h:2", region: "r", gpuType: "h100-80gb", gpuSlots: 8, stores: [], engines: [] };

function setup(answers: (AnnounceReply | "down")[]) {
  const clock = new VirtualClock(0);
  const lines: { level: string; msg: string; message?: string }[] = [];
  const log = createLogger("debug", {}, (l) => lines.push(JSON.parse(l) as { level: string; msg: string }));
  const sentAt: number[] = [];
  let i = 0;
  const announcer = new Announcer({
    regionAddress: "region:7000",
    intervalMs: 100,
    clock,
    log,
    announcement: () => node,
    send: async (a) => {
      expect(a).toBe(node);
      sentAt.push(clock.now());
      const r = answers[Math.min(i++, answers.length - 1)]!;
      if (r === "down") throw new TidegateError("upstream_error", "agent call failed: 14 UNAVAILABLE");
      return r;
    },
  });
  return { clock, lines, sentAt, announcer };
}

describe("Announcer", () => {
  it("announces every interval; logs once when the region is unreachable and once when it is back", async () => {
    const ok = { known: true, message: "" };
    const { clock, lines, sentAt, announcer } = setup([ok, "down", "down", "down", ok, ok]);
    announcer.start();
    await clock.advanceTo(550);
    await announcer.stop();
    await clock.advanceTo(1000);
    expect(sentAt).toEqual([0, 100, 200, 300, 400, 500]);
    expect(lines.map((l) => l.msg)).toEqual(["announced to region", "region unreachable; announcing again every interval", "region reachable again"]);
    expect(announcer.failed).toBe(3);
    expect(announcer.answered).toBe(3);
  });

  it("logs the region's reply when it is not known, once per change", async () => {
    const no = { known: false, message: "node n1 is not in region r's config" };
    const { clock, lines, announcer } = setup([no, no, no, { known: true, message: "" }]);
    announcer.start();
    await clock.advanceTo(350);
    await announcer.stop();
    expect(lines.filter((l) => l.msg === "region replied")).toEqual([expect.objectContaining({ level: "warn", known: false, message: no.message })]);
  });

  it("rejects a non-positive interval", () => {
    expect(() => new Announcer({ regionAddress: "x:1", intervalMs: 0, clock: new VirtualClock(0), log: createLogger("error"), announcement: () => node, send: async () => ({ known: true, message: "" }) })).toThrow(/intervalMs must be a positive integer/);
  });
});
