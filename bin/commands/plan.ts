/** `tidegate plan`: one offline planning run from a history file and a fleet file; writes JSON + HTML reports. */
import type { Command } from "../command.js";
import { TidegateError } from "../../core/errors.js";
import { createForecaster, isForecasterName } from "../../forecasts/registry.js";
import { readFleetFile } from "../../planner/fleet.js";
import { readHistoryFile } from "../../planner/history-file.js";
import { runPlan } from "../../planner/plan.js";
import { HighsSolver } from "../../planner/solver.js";
import { writePlanFiles } from "../../planner/store.js";

export const command: Command = {
  name: "plan",
  summary: "plan offline from a history file and a fleet file; writes JSON + HTML reports",
  description: `Forecasts the next hour for every (model, region) in the history, solves the placement ILP over the fleet,
and writes <out>/<plan-id>.json and <out>/<plan-id>.html (open the HTML in a browser).

History file (CSV, one row per minute, model and region; missing minutes are gaps):
  minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s
Fleet file (JSON): {"alpha":0.8,"beta":0.2,"gpus":{"h100-80gb":{"holdPerGpu":5,"vmStartPerGpu":0.4}},
  "models":{"llama2-70b":{"h100-80gb":{"gpusPerInstance":4,"tokensPerS":5560,"modelStartCost":0.5}}},
  "regions":[{"name":"us-east","capacity":{"h100-80gb":64},"endpoints":[{"model":"llama2-70b","gpu":"h100-80gb",
  "instances":2,"minInstances":1,"maxInstances":8,"spotInstances":0}]}]}
  tokensPerS may be omitted where the performance model has a profile (measured data at TTFT 1 s, TBT 100 ms).
  "provisionFor": "upper" (default: the ILP covers each peak forecast's 90% upper bound; targets carry the
  point forecast's count as their floor) or "mean" (the point forecast).

Example:
  tidegate plan --history history.csv --fleet fleet.json --out plans/`,
  flags: {
    history: { type: "string", help: "history CSV file (required)" },
    fleet: { type: "string", help: "fleet JSON file (required)" },
    out: { type: "string", help: "directory for the reports (required)" },
    forecaster: { type: "string", help: "blend | arima | seasonal-naive | persistence", default: "blend" },
    advisory: { type: "boolean", help: "mark the plan advisory", default: false },
  },
  async run(flags) {
    for (const f of ["history", "fleet", "out"]) if (typeof flags[f] !== "string") throw new TidegateError("invalid_request", `--${f} is required (see --help)`);
    const name = String(flags.forecaster);
    if (!isForecasterName(name)) throw new TidegateError("invalid_request", `--forecaster must be blend, arima, seasonal-naive or persistence, got ${JSON.stringify(name)}`);
    const fleet = readFleetFile(String(flags.fleet));
    const hist = readHistoryFile(String(flags.history));
    process.stderr.write(`tidegate plan: ${hist.rows} history rows, ${fleet.regions.length} regions\n`);
    const forecaster = createForecaster({ name });
    try {
      const report = await runPlan({
        fleet,
        history: hist.history,
        forecaster,
        solver: await HighsSolver.create(),
        nowMs: hist.endMs,
        decisionId: 0,
        advisory: flags.advisory === true,
        onProgress: (m) => process.stderr.write(`tidegate plan: ${m}\n`),
      });
      const files = writePlanFiles(String(flags.out), report);
      process.stdout.write(`${JSON.stringify({ id: report.id, status: report.solver.status, gap: report.solver.gap, cost: report.cost.total, unmet: report.unmet.length, warnings: report.warnings.length, json: files.json, html: files.html })}\n`);
      for (const u of report.unmet) process.stderr.write(`tidegate plan: could not meet ${u.kind} ${[u.model, u.region, u.gpu].filter(Boolean).join("@")}: ${u.amount.toFixed(1)} (${u.why})\n`);
      return 0;
    } finally {
      await forecaster.close();
    }
  },
};
