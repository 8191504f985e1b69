/**
 * The `--trace` path of `tidegate replay` (bin/commands/replay.ts dispatches on --trace): reads a request-level
 * trace, replays it through the replay wiring in virtual time (run.ts) with a progress bar on stderr, and prints
 * TTFT / TBT / E2E percentiles per model and region, utilization, and simulated requests per wall second.
 */
import type { FlagSpec, FlagValues } from "./args.js";
import { loadConfig } from "../core/config.js";
import "../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { ValidationError } from "../core/validate.js";
import { defaultDataDir } from "../core/paths.js";
import { ProgressBar } from "../sim/week/progress.js";
import { formatSummary, replayTrace } from "../sim/replay/summary.js";
import { NAMED_TRACES, readTrace } from "../sim/replay/traces.js";

/** Flags of the trace path (merged into `tidegate replay`'s flag table; `seed`, `quiet` and `data-dir` are shared with week). */
export const TRACE_FLAGS: Record<string, FlagSpec> = {
  trace: { type: "string", help: `trace: ${Object.keys(NAMED_TRACES).join(", ")}, or a .csv (Azure format) / .jsonl (Mooncake format) file` },
  config: { type: "string", help: "trace: fleet config file (JSON); default: the embedded `tidegate dev` fleet" },
  limit: { type: "number", help: "trace: replay only the first N requests" },
  json: { type: "boolean", help: "trace: print the summary as one JSON line at the end", default: false },
};

/** `tidegate replay --trace …`. */
export async function runTraceCommand(flags: FlagValues): Promise<number> {
  const name = flags.trace;
  if (typeof name !== "string" || name === "") throw new ValidationError("--trace", "is required", "invalid_request");
  const seed = typeof flags.seed === "number" ? flags.seed : 1;
  if (!Number.isInteger(seed) || seed < 0) throw new ValidationError("--seed", `must be an integer ≥ 0, got ${seed}`, "invalid_request");
  const limit = flags.limit;
  if (limit !== undefined && !(typeof limit === "number" && Number.isInteger(limit) && limit >= 1)) throw new ValidationError("--limit", "must be an integer ≥ 1", "invalid_request");
  const config = loadConfig(typeof flags.config === "string" ? flags.config : undefined);
  const trace = readTrace(name, defaultDataDir(typeof flags["data-dir"] === "string" ? flags["data-dir"] : undefined));
  const bar = flags.quiet === true ? undefined : new ProgressBar(`replay ${name}`, process.stderr, 200);
  const { summary } = await replayTrace(trace, config, seed, {
    ...(typeof limit === "number" ? { limit } : {}),
    ...(bar === undefined ? {} : { onProgress: (v: number, span: number, finished: number) => bar.update(span > 0 ? v / span : 1, finished) }),
  });
  bar?.done(summary.requests);
  process.stdout.write(formatSummary(summary) + "\n");
  if (flags.json === true) process.stdout.write(JSON.stringify(summary) + "\n");
  return 0;
}
