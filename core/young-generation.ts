/**
 * A cap on V8's young generation (new space) for a long-running process (issue 32: the global router's RSS under
 * overload).
 *
 * V8 doubles the new space whenever more bytes survived its scavenges since the last growth than it holds, up to
 * `--max-semi-space-size` (16 MiB per semi-space in Node 20: a 32 MiB new space). Any process that relays for long
 * enough reaches that size, and V8 gives it back only from a memory-reducing GC, which an idle Node process may not
 * run for minutes: measured in bench:overload, the global router's new space went from 8 to 32 MiB during the
 * overload and stayed there, 24 of its 30.5 MiB of RSS growth (the old space grew 4.5 MiB).
 *
 * `--max-semi-space-size` is read only when the heap is set up, so a process cannot lower it for itself. The factor
 * of each growth (`--semi-space-growth-factor`, default 2) is read at each growth. After every GC this sets the
 * factor to 1 (no growth) once the new space's capacity is above half the cap, and back to 2 below it, so the new
 * space stays within `capMiB` as long as no single event-loop turn allocates enough to make V8 grow it twice
 * (GC observers run between turns; a relay's turn allocates kilobytes, a growth takes megabytes of survivors). It
 * does not shrink the new space: V8 still does that when it reduces memory.
 * Changing a V8 flag at run time is what `v8.setFlagsFromString` is for; Node warns that a flag may do nothing, and
 * the test (young-generation.test.ts) checks in a child process that this one still holds the new space.
 */
import { PerformanceObserver } from "node:perf_hooks";
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";

/** V8's default growth factor of the new space (flag-definitions.h, semi_space_growth_factor). */
const V8_GROWTH_FACTOR = 2;

/** The new space's capacity now (bytes), both semi-spaces. */
export function newSpaceBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0;
}

/**
 * Holds this process's new space at or below `capMiB` from now on; returns a function that stops doing so (and
 * gives V8 its own growth factor back). `capMiB` 0: nothing is done.
 */
export function capYoungGeneration(capMiB: number): () => void {
  if (!(capMiB >= 0)) throw new RangeError(`young generation cap must be ≥ 0 MiB, got ${capMiB}`);
  if (capMiB === 0) return () => {};
  const cap = capMiB * 1024 * 1024;
  let factor = V8_GROWTH_FACTOR;
  const setFactor = (f: number) => {
    if (f === factor) return;
    factor = f;
    setFlagsFromString(`--semi-space-growth-factor=${f}`);
  };
  // A growth doubles the capacity: allowed only while twice the capacity stays within the cap.
  const check = () => setFactor(newSpaceBytes() * V8_GROWTH_FACTOR > cap ? 1 : V8_GROWTH_FACTOR);
  check();
  const observer = new PerformanceObserver(check);
  observer.observe({ entryTypes: ["gc"] });
  return () => {
    observer.disconnect();
    setFactor(V8_GROWTH_FACTOR);
  };
}
