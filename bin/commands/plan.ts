/**
 * `tidegate plan`: one offline planning run from history (tidegate's CSV, or the shipped ServeGen / Azure / per-minute
 * files, planner/import.ts) and a fleet file (or a stand-in fleet); writes JSON + HTML reports.
 */
import type { Command } from "../command.js";
import { TidegateError } from "../../core/errors.js";
import { DEFAULT_FORECASTER_NAME, FORECASTER_NAMES, createForecaster, isForecasterName } from "../../forecasts/registry.js";
import { readFleetFile } from "../../planner/fleet.js";
import { importHistories } from "../../planner/import.js";
import { standInFleet } from "../../planner/standin-fleet.js";
import { runPlan } from "../../planner/plan.js";
import { HighsSolver } from "../../core/solver.js";
import { writePlanFiles } from "../../planner/store.js";

export const command: Command = {
  name: "plan",
  summary: "plan offline from history (tidegate CSV or the shipped ServeGen/Azure files) and a fleet; writes JSON + HTML",
  description: `Forecasts the next hour for every (model, region) in the history, solves the placement ILP over the fleet,
and writes <out>/<plan-id>.json and <out>/<plan-id>.html (open the HTML in a browser). The plan is made at the
end of the history.

History (--history FILE[,FILE...]), each file in one of these formats (detected from its first line):
  tidegate history CSV, one row per minute, model and region (missing minutes are gaps):
    minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s
  ServeGen aggregate (servegen/aggregate/*_total_rate_600s.csv): tokens/s = rate × (mean input + output tokens)
  ServeGen per-client trace (servegen/data/<cat>/<model>/chunk-<n>-trace.csv): rate × --tokens-per-request
  Azure LLM trace (azure_llm_2023/AzureLLMInferenceTrace_*.csv): tokens per minute / 60
  per-minute series (derived/*_per_minute.csv): (input + output tokens) / 60
  A non-tidegate file is one series, named --model/--region (default: the trace's model, e.g. m-large, in
  region "servegen"). ServeGen has no calendar: its times are hours from the trace start ("hour 336").
  \`tidegate history import\` writes any of them as a tidegate history CSV.
Fleet file (JSON): {"alpha":0.8,"beta":0.2,"gpus":{"h100-80gb":{"holdPerGpu":5,"vmStartPerGpu":0.4}},
  "models":{"llama2-70b":{"h100-80gb":{"gpusPerInstance":4,"tokensPerS":5560,"modelStartCost":0.5}}},
  "regions":[{"name":"us-east","capacity":{"h100-80gb":64},"endpoints":[{"model":"llama2-70b","gpu":"h100-80gb",
  "instances":2,"minInstances":1,"maxInstances":8,"spotInstances":0}]}]}
  tokensPerS may be omitted where the performance model has a profile (measured data at TTFT 1 s, TBT 100 ms).
  "provisionFor": "upper" (default: the ILP covers each peak forecast's 90% upper bound; targets carry the
  point forecast's count as their floor) or "mean" (the point forecast). "currency" labels the costs (default USD).
  Without --fleet, each series gets a stand-in endpoint (4 × h100-80gb at llama2-70b's measured throughput,
  starting at what the last day's peak needed); the report's warnings say so.

Examples:
  tidegate plan --history history.csv --fleet fleet.json --out plans/
  tidegate plan --history core/data/servegen/aggregate/language_m-large_total_rate_600s.csv,core/data/servegen/aggregate/language_m-mid_total_rate_600s.csv --out plans/
  (core/data/ ships the ServeGen aggregates and the Azure 2023 traces; core/data/README.txt says where they come from)`,
  flags: {
    history: { type: "string", help: "history file(s), comma-separated (required; formats above)" },
    fleet: { type: "string", help: "fleet JSON file (default: a stand-in fleet, see above)" },
    model: { type: "string", help: "model name for a single non-tidegate history file" },
    region: { type: "string", help: "region name for a single non-tidegate history file" },
    "tokens-per-request": { type: "number", help: "tokens per request for ServeGen per-client traces", default: 1000 },
    out: { type: "string", help: "directory for the reports (required)" },
    forecaster: { type: "string", help: FORECASTER_NAMES.join(" | "), default: DEFAULT_FORECASTER_NAME },
    advisory: { type: "boolean", help: "mark the plan advisory", default: false },
  },
  async run(flags) {
    for (const f of ["history", "out"]) if (typeof flags[f] !== "string") throw new TidegateError("invalid_request", `--${f} is required (see --help)`);
    const name = String(flags.forecaster);
    if (!isForecasterName(name)) throw new TidegateError("invalid_request", `--forecaster must be one of ${FORECASTER_NAMES.join(", ")}, got ${JSON.stringify(name)}`);
    const tpr = Number(flags["tokens-per-request"]);
    if (!(tpr > 0)) throw new TidegateError("invalid_request", `--tokens-per-request must be > 0, got ${tpr}`);
    const files = String(flags.history).split(",").map((f) => f.trim()).filter((f) => f !== "");
    const hist = await importHistories(files, { tokensPerRequest: tpr, ...(typeof flags.model === "string" ? { model: flags.model } : {}), ...(typeof flags.region === "string" ? { region: flags.region } : {}) });
    for (const d of hist.descriptions) process.stderr.write(`tidegate plan: ${d}\n`);
    const standIn = typeof flags.fleet === "string" ? undefined : await standInFleet(hist.history, hist.series, hist.endMs);
    const fleet = standIn?.fleet ?? readFleetFile(String(flags.fleet));
    if (standIn !== undefined) process.stderr.write(`tidegate plan: ${standIn.description}\n`);
    process.stderr.write(`tidegate plan: ${hist.rows} history samples, ${hist.series.length} series, ${fleet.regions.length} regions${hist.timeBase === "relative" ? "; times are hours from the trace start" : ""}\n`);
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
        timeBase: hist.timeBase,
        trigger: { kind: "offline" },
        onProgress: (m) => process.stderr.write(`tidegate plan: ${m}\n`),
      });
      if (standIn !== undefined) report.warnings.unshift(standIn.description);
      const files = writePlanFiles(String(flags.out), report);
      process.stdout.write(`${JSON.stringify({ id: report.id, status: report.solver.status, gap: report.solver.gap, cost: report.cost.total, unmet: report.unmet.length, warnings: report.warnings.length, forecasts: report.forecasts.length, json: files.json, html: files.html })}\n`);
      for (const u of report.unmet) process.stderr.write(`tidegate plan: could not meet ${u.kind} ${[u.model, u.region, u.gpu].filter(Boolean).join("@")}: ${u.amount.toFixed(1)} (${u.why})\n`);
      return 0;
    } finally {
      await forecaster.close();
    }
  },
};
