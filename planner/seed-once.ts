/**
 * `tidegate dev`'s seed, once per series: a day of the shipped ServeGen aggregates (seed.ts) goes into the planner's
 * history for every (model, region) of the config that the seed list (`<queue.dataDir>/planner/seeded.json`) does not
 * name yet, and only into the minutes where the history holds no interactive load — recorded load is never added to.
 * Then the list names them. So:
 * - a new data directory gets the whole day (the first plan forecasts every (model, region));
 * - a restart seeds nothing again;
 * - a history recorded without a seed (by a tidegate that did not ship the data, or while the data was missing) is
 *   seeded at the first start that finds the data, in its gaps;
 * - a config with other models or regions on the same data directory seeds its new series.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { TidegateConfig } from "../core/config.js";
import type { DemandHistory, DemandSample } from "../forecasts/history.js";
import { MINUTE_MS } from "../forecasts/history.js";
import { writeDurably } from "./durable-file.js";
import { describeSeed, servegenSeedSamples, type SeedOptions } from "./seed.js";

/** What the seed did, for the log: each line at its level. */
export interface SeedOnceResult {
  /** (model, region) series seeded at this start (`model@region`). */
  seeded: string[];
  lines: { level: "info" | "warn"; msg: string }[];
}

/** The seed list's file in a dev data directory. */
export function seedListFile(dataDir: string): string {
  return join(dataDir, "planner", "seeded.json");
}

/** The series the seed list names; a missing file names none, an unreadable one too (said in `warn`). */
function readSeedList(file: string, warn: (msg: string) => void): Set<string> {
  if (!existsSync(file)) return new Set();
  try {
    const v = JSON.parse(readFileSync(file, "utf8")) as { series?: unknown };
    if (Array.isArray(v.series) && v.series.every((s) => typeof s === "string")) return new Set(v.series as string[]);
    warn(`${file} does not list series: every (model, region) is seeded again where the history has no load`);
  } catch (err) {
    warn(`${file} could not be read (${(err as Error).message}): every (model, region) is seeded again where the history has no load`);
  }
  return new Set();
}

const seriesOf = (s: { model: string; region: string }) => `${s.model}@${s.region}`;

/** Seeds `history` (see the file comment); `listFile` is `seedListFile(<queue.dataDir>)`. */
export async function seedDevHistoryOnce(history: DemandHistory, config: TidegateConfig, o: SeedOptions & { listFile: string }): Promise<SeedOnceResult> {
  const lines: SeedOnceResult["lines"] = [];
  const done = readSeedList(o.listFile, (msg) => lines.push({ level: "warn", msg }));
  const want = config.regions.flatMap((r) => r.endpoints.map((e) => seriesOf({ model: e.model, region: r.name })));
  const todo = new Set(want.filter((s) => !done.has(s)));
  if (todo.size === 0) {
    lines.push({ level: "info", msg: `planner history not seeded: every (model, region) was seeded at an earlier start (${o.listFile})` });
    return { seeded: [], lines };
  }
  const aggregates = join(o.dataDir, "servegen", "aggregate");
  if (!existsSync(aggregates)) {
    lines.push({ level: "warn", msg: `no ServeGen aggregates at ${aggregates}: the plans have no history for ${todo.size} (model, region) series until the regions have served a while (they plan for minimums only); the first start that finds them (tidegate ships them in core/data/servegen/aggregate) seeds the history` });
    return { seeded: [], lines };
  }
  const { samples, seeded } = servegenSeedSamples(config, o);
  // Only the minutes the history has no interactive load for, per series still to seed.
  const kept: DemandSample[] = [];
  let held = 0;
  const bySeries = new Map<string, DemandSample[]>();
  for (const s of samples) if (todo.has(seriesOf(s))) bySeries.set(seriesOf(s), [...(bySeries.get(seriesOf(s)) ?? []), s]);
  for (const [, list] of bySeries) {
    const from = Math.min(...list.map((s) => s.minuteMs));
    const to = Math.max(...list.map((s) => s.minuteMs)) + MINUTE_MS;
    const recorded = await history.series({ kind: "iw", model: list[0]!.model, region: list[0]!.region }, from, to);
    for (const s of list) {
      if (Number.isNaN(recorded[Math.floor((s.minuteMs - from) / MINUTE_MS)] ?? Number.NaN)) kept.push(s);
      else held++;
    }
  }
  await history.add(kept);
  const days = o.days ?? 1;
  const fill = o.fill ?? 0.7;
  const shown = seeded
    .map((m) => ({ ...m, peakTokensPerS: Object.fromEntries(Object.entries(m.peakTokensPerS).filter(([r]) => todo.has(`${m.model}@${r}`))) }))
    .filter((m) => Object.keys(m.peakTokensPerS).length > 0);
  if (kept.length === 0) lines.push({ level: "info", msg: `planner history not seeded: its ${todo.size} (model, region) series hold recorded load for every minute a seed would fill` });
  else for (const line of describeSeed(shown, days, fill)) lines.push({ level: "info", msg: `seeded planner history: ${line}` });
  if (held > 0 && kept.length > 0) lines.push({ level: "info", msg: `seeded planner history only where it had no load: ${kept.length} seeded minutes, ${held} minutes kept as recorded (a history recorded without a seed)` });
  const list = [...new Set([...done, ...todo])].sort();
  mkdirSync(dirname(o.listFile), { recursive: true });
  await writeDurably(dirname(o.listFile), basename(o.listFile), JSON.stringify({ series: list, source: aggregates }, null, 1) + "\n");
  return { seeded: [...todo], lines };
}
