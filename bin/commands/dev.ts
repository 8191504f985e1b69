/**
 * `tidegate dev`: every tier in one process on the embedded default (core/config DEFAULT_CONFIG_JSON: 3 regions,
 * 4 models) or a config file — one region per config region (buildRegion, simulated engines in real time), wired to
 * the global router through in-process RegionLinks — serving the OpenAI API on http://127.0.0.1:8080. This module
 * stays light: it reads the configuration and checks the port, then loads the rest (bin/dev-run.ts,
 * bin/dev-stack.ts), so a port in use is said within a second or two, before anything of the fleet starts.
 */
import type { Command } from "../command.js";
import { routerConfigFromFlags } from "../config-flags.js";
import { ensurePortFree } from "../../core/listen.js";

export const command: Command = {
  name: "dev",
  summary: "run every tier in one process on the embedded default (3 regions, 4 models, simulated engines)",
  description: [
    "Starts the global router, one region gateway per region with simulated engines running in real time, and",
    "in-process links between them. With no --config it runs the embedded default: regions us-east, us-central,",
    "us-west; models llama2-70b, bloom-176b, llama3.1-8b, llama3.2-3b. Stops cleanly on SIGINT/SIGTERM.",
    "",
    "Standard output is the banner: the URL, the admin key, where to look. The JSON log goes to",
    "<queue.dataDir>/dev.log (default .data/dev.log, overwritten at each start; --log-file FILE elsewhere,",
    "--log-file - to stderr); warnings and errors are also printed on stderr, with start-up progress (one line",
    "rewritten in place on a terminal).",
    "",
    "controller.actuator picks how instances come and go: \"agents\" (default: node agents in process, parameters over",
    "loopback TCP), \"sim\" (the replays' simulated actuator: SageServe deploy delays, no data plane) or \"static\".",
    "test/e2e/live-vs-replay.test.ts runs the \"sim\" wiring on a scaled wall clock against the week replay.",
    "",
    "Example:",
    "  tidegate dev",
    "  curl -N http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' \\",
    `    -d '{"model":"llama3.2-3b","messages":[{"role":"user","content":"hello"}],"stream":true}'`,
  ].join("\n"),
  flags: {
    config: { type: "string", help: "config file (JSON), merged over the embedded default; FILE,FILE… merges several in order" },
    port: { type: "number", help: "port of the public API (overrides router.port; 0 picks a free port)" },
    host: { type: "string", help: "address to listen on (overrides router.host)" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
    "log-file": { type: "string", help: "the JSON log's file (default <queue.dataDir>/dev.log, overwritten at each start); - sends it to stderr" },
    "redis-url": { type: "string", help: "batch queue on this Redis (sets queue.backend redis); default: config queue" },
    "recover-journal": { type: "boolean", help: "embedded queue: keep the journal's valid prefix and move a bad line and the rest aside (queue.recoverJournal)", default: false },
  },
  config: routerConfigFromFlags,
  async run(flags) {
    const startedAt = Date.now();
    const config = routerConfigFromFlags(flags);
    // A port in use ends the command here, in one line, before the log file or anything of the fleet is touched.
    await ensurePortFree(config.router.host, config.router.port, "--port / router.port");
    const { runDev } = await import("../dev-run.js");
    return runDev(flags, config, startedAt);
  },
};
