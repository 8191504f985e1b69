#!/usr/bin/env node
/**
 * `tidegate <command> [flags]`: the CLI. Each command lives in bin/commands/<name>.ts and is loaded on demand so
 * `tidegate --help` stays fast.
 */
import { formatFlags, parseArgs } from "./args.js";
import type { Command } from "./command.js";
import { packageVersion } from "../core/paths.js";
import { toTidegateError } from "../core/errors.js";

const COMMANDS: Record<string, { summary: string; load: () => Promise<{ command: Command }> }> = {
  dev: { summary: "run every tier in one process on the embedded default (3 regions, 4 models, simulated engines)", load: () => import("./commands/dev.js") },
  global: { summary: "run the global router: public OpenAI-compatible API, region selection, batch queue", load: () => import("./commands/global.js") },
  region: { summary: "run one region: gateway, controller and engines (scaled through node agents), telemetry over gRPC", load: () => import("./commands/region.js") },
  "engine-sim": { summary: "run a vLLM-compatible simulated engine (OpenAI API + vLLM metrics)", load: () => import("./commands/engine-sim.js") },
  agent: { summary: "run a node agent: parameter blocks and multicast transfers (gRPC)", load: () => import("./commands/agent.js") },
  planner: { summary: "run the hourly planner loop (forecast + ILP), leader-elected through Redis", load: () => import("./commands/planner.js") },
  plan: { summary: "plan offline from history (tidegate CSV or the shipped ServeGen/Azure files) and a fleet; writes JSON + HTML", load: () => import("./commands/plan.js") },
  history: { summary: "demand history tools (`history import`: shipped ServeGen/Azure files → tidegate history CSV)", load: () => import("./commands/history.js") },
  forecast: { summary: "forecasting tools (`forecast backtest`)", load: () => import("./commands/forecast.js") },
  replay: { summary: "replay traces or a week-long workload in virtual time through the real policies", load: () => import("./commands/replay.js") },
};

function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`);
  return `tidegate ${packageVersion()}: a multi-region control plane for serving LLMs\n\nUsage: tidegate <command> [flags]\n       tidegate --version\n\nCommands:\n${rows.join("\n")}\n\nRun 'tidegate <command> --help' for a command's flags. Every command with --config also takes\n--print-config: it prints the file merged over the embedded default and validated (every error listed), with the\ncommand's flags that override config keys (e.g. dev --port) applied, then exits.`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage() + "\n");
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v" || name === "version") {
    process.stdout.write(`tidegate ${packageVersion()}\n`);
    return 0;
  }
  const entry = COMMANDS[name];
  if (entry === undefined) {
    process.stderr.write(`tidegate: unknown command ${JSON.stringify(name)}\n\n${usage()}\n`);
    return 2;
  }
  const { command } = await entry.load();
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(`Usage: tidegate ${command.name} [flags]\n\n${command.summary}\n\n${command.description}\n\nFlags:\n${formatFlags(command.flags)}\n`);
    return 0;
  }
  if (rest.includes("--print-config") && command.flags.config !== undefined) {
    // The configuration this command would run with: the file merged over the embedded default, validated, with the
    // flags that override config keys applied (the command's own `config`, which its `run` uses too).
    const { flags } = parseArgs(rest.filter((a) => a !== "--print-config"), command.flags);
    const { configFromFlags } = await import("./config-flags.js");
    process.stdout.write(JSON.stringify(command.config?.(flags) ?? configFromFlags(flags), null, 2) + "\n");
    return 0;
  }
  const { flags, positional } = parseArgs(rest, command.flags);
  return command.run(flags, positional);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const e = toTidegateError(err);
    process.stderr.write(`tidegate: ${e.code === "internal" ? String((err as Error)?.stack ?? err) : e.message}\n`);
    process.exitCode = e.code === "internal" ? 1 : 2;
  },
);
