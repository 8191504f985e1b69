/** FileHistory: what `tidegate dev` records survives a restart; damaged and expired hours are handled as documented. */
import { afterAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DAY_MS, MINUTE_MS, type DemandSample } from "../forecasts/history.js";
import { FileHistory, hourFileName } from "./file-history.js";

const root = mkdtempSync(join(tmpdir(), "tidegate-file-history-"));
let dirs = 0;
const freshDir = () => join(root, `h-${++dirs}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const T0 = Date.UTC(2026, 10, 23, 13, 0);
const iw = (minute: number, tokensPerS: number, model = "m"): DemandSample => ({ kind: "iw", model, region: "r", minuteMs: T0 + minute * MINUTE_MS, tokensPerS });

describe("FileHistory", () => {
  it("reads back after a reopen exactly what was added, minute by minute, gaps included", async () => {
    const dir = freshDir();
    const h = await FileHistory.open(dir, { nowMs: T0 });
    await h.add([iw(0, 10), iw(1, 11), iw(59, 12), iw(61, 20)]);
    await h.add([iw(1, 1), { kind: "niw", model: "m", region: "r", minuteMs: T0 + 5 * MINUTE_MS, tokensPerS: 3 }]); // adds to minute 1
    expect(readdirSync(dir).sort()).toEqual([hourFileName(T0), hourFileName(T0 + 3_600_000)]);
    const again = await FileHistory.open(dir, { nowMs: T0 + 2 * 3_600_000 });
    const key = { kind: "iw" as const, model: "m", region: "r" };
    expect(await again.series(key, T0, T0 + 62 * MINUTE_MS)).toEqual(await h.series(key, T0, T0 + 62 * MINUTE_MS));
    expect((await again.series(key, T0, T0 + 3 * MINUTE_MS))).toEqual([10, 12, Number.NaN]);
    expect(await again.series({ kind: "niw", model: "m", region: "r" }, T0 + 5 * MINUTE_MS, T0 + 6 * MINUTE_MS)).toEqual([3]);
    expect((await again.keys()).length).toBe(2);
    expect(again.opened).toMatchObject({ hours: 2, minutes: 5, expired: 0, setAside: [] });
  });

  it("stores nothing of a batch it rejects", async () => {
    const dir = freshDir();
    const h = await FileHistory.open(dir, { nowMs: T0 });
    await expect(h.add([iw(0, 1), iw(1, Number.NaN)])).rejects.toThrow(RangeError);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("sets a damaged hour aside and keeps every other hour; removes hours past the retention", async () => {
    const dir = freshDir();
    const h = await FileHistory.open(dir, { nowMs: T0 });
    await h.add([iw(0, 5), iw(60, 6), iw(120, 7)]);
    writeFileSync(join(dir, hourFileName(T0 + 3_600_000)), '{"format":"tidegate-history-hour-1","hourMs":'); // cut short
    writeFileSync(join(dir, "notes.json"), "{}");
    const again = await FileHistory.open(dir, { nowMs: T0 + 3 * 3_600_000 });
    const key = { kind: "iw" as const, model: "m", region: "r" };
    expect(await again.series(key, T0, T0 + 121 * MINUTE_MS).then((xs) => [xs[0], xs[60], xs[120]])).toEqual([5, Number.NaN, 7]);
    expect(again.opened.setAside.map((a) => [a.file, a.movedTo])).toEqual([[hourFileName(T0 + 3_600_000), `${hourFileName(T0 + 3_600_000)}.damaged-1`], ["notes.json", "notes.json.damaged-1"]]);
    // Eight days on, the first hour has aged out: it is deleted at open, the others stay.
    const later = await FileHistory.open(dir, { nowMs: T0 + 8 * DAY_MS + 3_600_000 });
    expect(later.opened).toMatchObject({ hours: 1, expired: 1 });
    expect(existsSync(join(dir, hourFileName(T0)))).toBe(false);
  });
});
