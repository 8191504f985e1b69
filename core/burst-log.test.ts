/** One summary line per burst (burst-log.ts) on a virtual clock. */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "./clock.js";
import type { Logger } from "./log.js";
import { BurstLog } from "./burst-log.js";

function recorder() {
  const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  const at = (level: string) => (msg: string, fields: Record<string, unknown> = {}) => void lines.push({ level, msg, fields });
  const log: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => log };
  return { lines, log };
}

describe("BurstLog", () => {
  it("logs one line for a burst of events, after it has been quiet for quietMs, with counts by key and the first event", () => {
    const clock = new VirtualClock(0);
    const { lines, log } = recorder();
    const b = new BurstLog({ clock, log, msg: "streams failed", quietMs: 1000 });
    for (let i = 0; i < 42; i++) {
      clock.advanceToSync(i * 10);
      b.note(i % 3 === 0 ? "us-east upstream_error" : "us-west upstream_error", { stream: i });
    }
    clock.advanceToSync(1500);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toEqual({ level: "warn", msg: "streams failed", fields: { count: 42, byKey: { "us-east upstream_error": 14, "us-west upstream_error": 28 }, first: { stream: 0 }, spanMs: 410 } });
    // The next burst is its own line.
    b.note("us-east upstream_error", { stream: 99 });
    clock.advanceToSync(2500);
    expect(lines).toHaveLength(2);
    expect(lines[1]!.fields).toMatchObject({ count: 1, first: { stream: 99 } });
  });

  it("a storm that never goes quiet still reports every maxMs; flush logs what is open", () => {
    const clock = new VirtualClock(0);
    const { lines, log } = recorder();
    const b = new BurstLog({ clock, log, msg: "m", quietMs: 500, maxMs: 2000, level: "info" });
    for (let t = 0; t <= 5000; t += 100) {
      clock.advanceToSync(t);
      b.note("k", { t });
    }
    expect(lines.map((l) => l.fields.count)).toEqual([20, 20]);
    expect(lines[0]!.level).toBe("info");
    b.flush();
    expect(lines.map((l) => l.fields.count)).toEqual([20, 20, 11]);
    b.flush();
    expect(lines).toHaveLength(3);
    expect(() => new BurstLog({ clock, log, msg: "m", quietMs: 0 })).toThrow(RangeError);
  });
});
