import { describe, expect, it } from "vitest";
import { ParameterPool } from "./parameter-pool.js";

const MiB = 1 << 20;

function pool() {
  const p = new ParameterPool();
  p.upsertNode("a", 100 * MiB);
  p.upsertNode("b", 100 * MiB);
  p.upsertNode("c", 60 * MiB);
  return p;
}

describe("ParameterPool", () => {
  it("lists complete copies on live nodes as sources, most recently used first", () => {
    const p = pool();
    p.setCopy("a", "m", 40 * MiB, true, 10);
    p.setCopy("b", "m", 40 * MiB, true, 20);
    p.setCopy("c", "m", 40 * MiB, false, 30);
    expect(p.sources("m")).toEqual(["b", "a"]);
    p.touch("a", "m", 50);
    expect(p.sources("m")).toEqual(["a", "b"]);
    p.loseNode("a");
    expect(p.sources("m")).toEqual(["b"]);
  });

  it("restores the invariant after a node is lost: copies from what remains to the live node with most room", () => {
    const p = pool();
    p.setCopy("a", "m", 40 * MiB, true, 0);
    p.setCopy("a", "n", 30 * MiB, true, 0);
    p.setCopy("b", "n", 30 * MiB, true, 0);
    p.setCopy("b", "x", 50 * MiB, true, 0);
    expect(p.repairs(["m", "n", "x"], () => 40 * MiB)).toEqual([]);
    expect(p.loseNode("a").sort()).toEqual(["m", "n"]);
    // m lost its only copy: no source left; n still has b; x untouched
    expect(p.repairs(["m", "n", "x"], (m) => (m === "m" ? 40 : 30) * MiB)).toEqual([{ model: "m", sources: [], to: "c" }]);
    p.setCopy("c", "m", 40 * MiB, true, 1);
    p.upsertNode("a", 100 * MiB); // back, empty
    p.loseNode("b");
    // n has no copy left; x neither. The node with most free memory (a, 100 MiB) is the target of both.
    expect(p.repairs(["m", "n", "x"], (m) => (m === "x" ? 50 : 30) * MiB)).toEqual([
      { model: "n", sources: [], to: "a" },
      { model: "x", sources: [], to: "a" },
    ]);
  });

  it("evicts least recently used unpinned copies whose model keeps a copy elsewhere, never the last one", () => {
    const p = pool();
    p.setCopy("a", "old", 40 * MiB, true, 1);
    p.setCopy("a", "mid", 30 * MiB, true, 2);
    p.setCopy("a", "new", 20 * MiB, true, 3);
    p.setCopy("b", "old", 40 * MiB, true, 1);
    p.setCopy("b", "mid", 30 * MiB, true, 2);
    expect(p.freeBytes("a")).toBe(10 * MiB);
    expect(p.evictionsFor("a", 10 * MiB)).toEqual([]);
    expect(p.evictionsFor("a", 45 * MiB)).toEqual(["old"]);
    p.pin("a", "old", 1);
    expect(p.evictionsFor("a", 45 * MiB)).toBeUndefined(); // only "mid" may go: 10 + 30 MiB < 45
    expect(p.evictionsFor("a", 35 * MiB)).toEqual(["mid"]);
    p.pin("a", "old", -1);
    expect(p.evictionsFor("a", 80 * MiB)).toEqual(["old", "mid"]);
    // "new" has no other copy: evicting it would break the invariant
    expect(p.evictionsFor("a", 95 * MiB)).toBeUndefined();
    // the model being loaded is never evicted for itself
    expect(p.evictionsFor("a", 45 * MiB, "old")).toBeUndefined();
    expect(p.evictionsFor("a", 40 * MiB, "old")).toEqual(["mid"]);
  });
});
