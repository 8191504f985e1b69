/** `tidegate history import`: converts the shipped public traces into a tidegate history CSV (planner/import.ts). */
import { writeFileSync } from "node:fs";
import type { Command } from "../command.js";
import { TidegateError } from "../../core/errors.js";
import { importHistories, toHistoryCsv } from "../../planner/import.js";

export const command: Command = {
  name: "history",
  summary: "demand history tools (`history import`: shipped ServeGen/Azure files → tidegate history CSV)",
  description: `Usage: tidegate history import --in FILE[,FILE...] --out history.csv [--model M --region R] [--tokens-per-request N]

Reads ServeGen aggregate or per-client traces, Azure LLM traces or derived per-minute series (formats as in
\`tidegate plan --help\`) and writes one tidegate history CSV (minute_start_s,model,region,iw_tokens_per_s,
niw_tokens_per_s) for \`tidegate plan --history\`. Times without a calendar (ServeGen) stay seconds from the trace
start; reports show them as hours from the start.

Example:
  tidegate history import --in core/data/servegen/aggregate/language_m-large_total_rate_600s.csv --model llama2-70b --region us-east --out history.csv`,
  flags: {
    in: { type: "string", help: "input file(s), comma-separated (required)" },
    out: { type: "string", help: "history CSV to write (required)" },
    model: { type: "string", help: "model name (single input file)" },
    region: { type: "string", help: "region name (single input file)" },
    "tokens-per-request": { type: "number", help: "tokens per request for ServeGen per-client traces", default: 1000 },
  },
  async run(flags, positional) {
    if (positional[0] !== "import") throw new TidegateError("invalid_request", "usage: tidegate history import --in FILE --out FILE (see --help)");
    for (const f of ["in", "out"]) if (typeof flags[f] !== "string") throw new TidegateError("invalid_request", `--${f} is required (see --help)`);
    const tpr = Number(flags["tokens-per-request"]);
    if (!(tpr > 0)) throw new TidegateError("invalid_request", `--tokens-per-request must be > 0, got ${tpr}`);
    const files = String(flags.in).split(",").map((f) => f.trim()).filter((f) => f !== "");
    const h = await importHistories(files, { tokensPerRequest: tpr, ...(typeof flags.model === "string" ? { model: flags.model } : {}), ...(typeof flags.region === "string" ? { region: flags.region } : {}) });
    for (const d of h.descriptions) process.stderr.write(`tidegate history: ${d}\n`);
    writeFileSync(String(flags.out), toHistoryCsv(h.samples));
    process.stdout.write(`${JSON.stringify({ out: flags.out, series: h.series.length, timeBase: h.timeBase })}\n`);
    return 0;
  },
};
