import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { MemoryHistory } from "./history.js";
import { NiwRecorder } from "./niw-recorder.js";

const MIN = 60_000;

describe("NiwRecorder", () => {
  it("writes tokens/s per (model, region) and finished minute, zeros for quiet minutes, on the clock", async () => {
    const clock = new VirtualClock(10 * MIN);
    const history = new MemoryHistory();
    const rec = new NiwRecorder(history, ["m"], ["a", "b"], clock);
    rec.start();
    rec.record("m", "a", 600, 10 * MIN + 5_000);
    rec.record("m", "a", 600, 10 * MIN + 59_000);
    rec.record("m", "b", 120, 11 * MIN + 1_000);
    rec.record("x", "a", 1e6, 10 * MIN); // not a planned pair: ignored
    rec.record("m", "a", -5, 10 * MIN); // bad value: ignored
    await clock.advanceTo(13 * MIN);
    expect(await history.series({ kind: "niw", model: "m", region: "a" }, 10 * MIN, 13 * MIN)).toEqual([20, 0, 0]);
    expect(await history.series({ kind: "niw", model: "m", region: "b" }, 10 * MIN, 13 * MIN)).toEqual([0, 2, 0]);
    // A minute still open is written by stop() only once the clock has left it.
    rec.record("m", "a", 60, 13 * MIN + 1);
    await rec.stop();
    expect((await history.series({ kind: "niw", model: "m", region: "a" }, 13 * MIN, 14 * MIN))[0]).toBeNaN();
    expect(rec.written).toBe(6);
  });

  it("after a long pause back-fills at most an hour of minutes", async () => {
    const clock = new VirtualClock(0);
    const history = new MemoryHistory();
    const rec = new NiwRecorder(history, ["m"], ["a"], clock);
    await rec.flush(24 * 60 * MIN);
    expect(rec.written).toBe(60);
    const day = await history.series({ kind: "niw", model: "m", region: "a" }, 0, 24 * 60 * MIN);
    expect(day.filter((v) => v === 0)).toHaveLength(60);
    expect(day.slice(-60).every((v) => v === 0)).toBe(true);
  });
});
