/**
 * `tidegate replay`: whole-system replay in virtual time through the real policies. Dispatches on --trace first:
 * a request-level trace (Azure 2023, Mooncake) through the dev fleet's router/gateway/engine code (bin/replay-trace-cli.ts);
 * otherwise on --workload: `week` runs the week-long three-region workload with the planner in the loop
 * (bin/replay-week-cli.ts).
 */
import { TidegateError } from "../../core/errors.js";
import { TRACE_FLAGS, runTraceCommand } from "../replay-trace-cli.js";
import { WEEK_FLAGS, runWeekCommand } from "../replay-week-cli.js";
import type { Command } from "../command.js";

export const command: Command = {
  name: "replay",
  summary: "replay traces or a week-long workload in virtual time through the real policies",
  description: [
    "The Azure 2023 traces and the week workload's ServeGen per-client series ship with tidegate (core/data/).",
    "--trace mooncake reads Mooncake's traces, which do not ship (4 MB): name a full copy of the public data with",
    "--data-dir (core/data/README.txt says what it holds and where it comes from).",
    "",
    "Examples:",
    "  tidegate replay --trace azure-conv            (Azure 2023 conversation trace, 19,366 requests, 1 h)",
    "  tidegate replay --trace azure-code --seed 7   (--seed also seeds a trace's model/region assignment; default 1)",
    "  tidegate replay --trace mooncake --data-dir ../shared/data",
    "  tidegate replay --workload week --strategy predictive-hpa",
    "  tidegate replay --workload week --strategy all --days 1 --out out/day",
  ].join("\n"),
  flags: {
    workload: { type: "string", help: "what to replay: week", default: "week" },
    ...WEEK_FLAGS,
    ...TRACE_FLAGS,
  },
  async run(flags) {
    if (flags.trace !== undefined) return runTraceCommand(flags);
    const workload = flags.workload;
    if (workload === "week") return runWeekCommand(flags);
    throw new TidegateError("invalid_request", `--workload must be one of: week; got ${JSON.stringify(workload)}`);
  },
};
