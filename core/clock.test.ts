import { describe, expect, it } from "vitest";
import { VirtualClock } from "./clock.js";

describe("VirtualClock", () => {
  it("fires events in time order, ties in insertion order", () => {
    const c = new VirtualClock(1000);
    const seen: string[] = [];
    c.after(50, () => seen.push("b@50"));
    c.after(10, () => seen.push("a@10"));
    c.after(50, () => seen.push("c@50"));
    c.advanceToSync(1040);
    expect(seen).toEqual(["a@10"]);
    expect(c.now()).toBe(1040);
    c.advanceToSync(2000);
    expect(seen).toEqual(["a@10", "b@50", "c@50"]);
    expect(c.now()).toBe(2000);
  });

  it("sets now() to each event's time while it runs, and cancelled events never fire", () => {
    const c = new VirtualClock();
    const times: number[] = [];
    const t = c.after(5, () => times.push(-1));
    c.after(7, () => times.push(c.now()));
    t.cancel();
    c.runUntilIdleSync();
    expect(times).toEqual([7]);
  });

  it("every() repeats until cancelled", () => {
    const c = new VirtualClock();
    let n = 0;
    const t = c.every(100, () => {
      n++;
      if (n === 3) t.cancel();
    });
    c.advanceToSync(10_000);
    expect(n).toBe(3);
  });

  it("sleep() resolves in virtual time and rejects on abort", async () => {
    const c = new VirtualClock();
    const order: string[] = [];
    const p = c.sleep(1000).then(() => order.push(`woke@${c.now()}`));
    await c.advanceTo(999);
    expect(order).toEqual([]);
    await c.advanceTo(1000);
    await p;
    expect(order).toEqual(["woke@1000"]);
    const ac = new AbortController();
    const q = c.sleep(10, ac.signal);
    ac.abort(new Error("stop"));
    await expect(q).rejects.toThrow("stop");
  });

  it("rejects negative delays", () => {
    expect(() => new VirtualClock().after(-1, () => {})).toThrow(RangeError);
  });
});

