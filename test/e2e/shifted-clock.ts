/**
 * `node dist/test/e2e/shifted-clock.js <offsetMs> <tidegate arguments…>`: the compiled CLI (procs.ts `CLI`) with its
 * wall clock moved `offsetMs` ahead: `Date.now()`, `new Date()` and `Date()` read the real time + offsetMs, while
 * timers and `performance.now()` are untouched, so every duration inside the process stays real and every time it
 * reads moves together (core/clock.ts WallClock reads Date.now()).
 *
 * For an end-to-end test that needs a boundary of the process's wall clock inside its run: `tidegate dev`'s planner
 * forecasts on 10-minute windows aligned to the epoch (planner/plan.ts WINDOW_MS), so a test that wants the next
 * window's plan within a few minutes starts dev this way shortly before a window boundary of dev's clock, and
 * computes the same offset to know when the boundary passes. Test-only: nothing in tidegate reads this.
 */
import { pathToFileURL } from "node:url";
import { CLI } from "./procs.js";

/** Replaces the global `Date` with one whose current time is the real one + `offsetMs` (parsing and explicit times unchanged). */
function shiftClock(offsetMs: number): void {
  const RealDate = Date;
  const now = (): number => RealDate.now() + offsetMs;
  // A plain function as constructor: `new Date()` returns a real Date (so `instanceof Date` holds both ways, the
  // prototype being the real one), `Date()` the current time as a string, as the built-in does.
  const Shifted = function (this: unknown, ...args: unknown[]): Date | string {
    if (new.target === undefined) return new RealDate(now()).toString();
    return args.length === 0 ? new RealDate(now()) : (Reflect.construct(RealDate, args) as Date);
  } as unknown as DateConstructor;
  Object.defineProperty(Shifted, "prototype", { value: RealDate.prototype });
  Object.defineProperty(Shifted, "now", { value: now });
  Object.defineProperty(Shifted, "parse", { value: RealDate.parse });
  Object.defineProperty(Shifted, "UTC", { value: RealDate.UTC });
  globalThis.Date = Shifted;
}

const [offsetArg, ...args] = process.argv.slice(2);
const offsetMs = Number(offsetArg);
if (offsetArg === undefined || !Number.isFinite(offsetMs)) {
  process.stderr.write("usage: node dist/test/e2e/shifted-clock.js <offsetMs> <tidegate arguments…>\n");
  process.exit(2);
}
shiftClock(offsetMs);
// The CLI reads process.argv.slice(2) when it loads.
process.argv = [process.argv[0]!, CLI, ...args];
await import(pathToFileURL(CLI).href);
