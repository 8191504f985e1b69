/**
 * `tidegate engine-sim --model M --gpu G --port P [--tp N] [--time-scale x] [--settings JSON] [--max-batch N] ...`: one
 * simulated serving instance (built by region/runtime/build-sim-engine.ts, as every region builds its own) that
 * looks like vLLM over HTTP (engines/sim/http.ts). Prints its base URL on stdout as one line (so callers can
 * spawn it with --port 0 and read the port), then serves until SIGINT/SIGTERM. With --parameters-from it first asks
 * that node agent whether the model's block store is complete and exits 1 when it is not.
 */
import type { Command } from "../command.js";
import { WallClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, gpusPerInstanceOf, parseConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { TidegateError } from "../../core/errors.js";
import { ENGINE_SETTINGS_SCHEMA, ENGINE_SETTING_KEYS, checkSetting, parseEngineSettingsJson, refuseEngineSettings, type EngineSettings } from "../../core/engine-settings.js";
import type { FlagSpec, FlagValues } from "../args.js";
import { GPU_SPECS, MODEL_SPECS } from "../../core/models.js";
import { AgentClient } from "../../nodes/agent/client.js";
import { tlsFromFlags, type TlsFiles } from "../../core/tls.js";
import { EngineSimServer, type EngineParameters, type ServedEngine } from "../../engines/sim/http.js";
import { DilatedClock, parsePipelineSpec } from "../../region/keystage/pipeline-engine.js";
import { parseStageSpec, StageServer } from "../../region/keystage/stage-server.js";
import { newEngine } from "../../region/runtime/build-sim-engine.js";

/** The model's complete store on the agent at `address`, or a message saying why there is none. */
async function parametersFrom(address: string, model: string, shared?: AgentClient, tls?: TlsFiles, onStore?: (present: number, blockCount: number) => void): Promise<EngineParameters | string> {
  const client = shared ?? new AgentClient(address, undefined, tls);
  try {
    const info = await client.info();
    const s = info.stores.find((x) => x.model === model);
    if (s === undefined) return `engine-sim: model ${model} has no block store on agent ${info.nodeId} (${address}); refusing to start without parameters`;
    onStore?.(s.present, s.blockCount);
    if (s.present < s.blockCount) return `engine-sim: model ${model} on agent ${info.nodeId} (${address}) has ${s.present} of ${s.blockCount} blocks; refusing to start on incomplete parameters`;
    return { model, bytes: s.totalBytes, blocks: s.blockCount };
  } catch (err) {
    return `engine-sim: cannot ask agent ${address} for model ${model}'s parameters: ${(err as Error).message}`;
  } finally {
    if (shared === undefined) client.close();
  }
}

function defaultTp(model: string, gpu: string): number | undefined {
  return gpusPerInstanceOf(parseConfig(DEFAULT_CONFIG_JSON), model, gpu);
}

/** The settings flags, from the schema: `--settings <json>` (what the region passes) and one flag per field over it. */
function settingsFlagSpecs(): Record<string, FlagSpec> {
  const out: Record<string, FlagSpec> = {
    settings: { type: "string", help: `engine settings as one JSON object (what the region passes): ${ENGINE_SETTING_KEYS.join(", ")}; the flags below override its fields` },
  };
  for (const key of ENGINE_SETTING_KEYS) {
    const s = ENGINE_SETTINGS_SCHEMA[key];
    out[s.flag] = { type: s.kind === "enum" ? "string" : "number", help: s.help };
  }
  return out;
}

/** The settings the flags give: `--settings`, then each field's own flag over it; errors name the flag. */
function settingsFromFlags(flags: FlagValues): EngineSettings {
  const out: Record<string, number | string> = typeof flags.settings === "string" ? { ...parseEngineSettingsJson(flags.settings, "--settings") } : {};
  for (const key of ENGINE_SETTING_KEYS) {
    const flag = ENGINE_SETTINGS_SCHEMA[key].flag;
    if (flags[flag] !== undefined) out[key] = checkSetting(key, flags[flag], `--${flag}`);
  }
  return out as EngineSettings;
}

/** Resolves on the first SIGINT or SIGTERM. */
function untilSignal(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}

export const command: Command = {
  name: "engine-sim",
  summary: "run a vLLM-compatible simulated engine (OpenAI API + vLLM metrics)",
  description: [
    "One simulated instance with continuous batching, KV admission and priorities, timed by the fitted performance",
    "model (engines/README.md). Serves POST /v1/chat/completions, POST /v1/completions (stream or not,",
    "stream_options.include_usage), GET /v1/models, /health and /metrics (vLLM metric names). Output is deterministic",
    "synthetic text seeded by the request id (x-request-id header when given). Prints its URL on stdout as one line.",
    "",
    "",
    "--parameters-from <host:port> takes the parameters from a node agent's block store: at start-up engine-sim asks",
    "that agent (Info) whether the model's store is complete, exits 1 with a message naming the model and the agent",
    "when it is not, and otherwise reports {\"status\":\"ok\",\"parameters\":{model, bytes, blocks}} on /health.",
    "",
    "--pipeline <json> serves the model as a pipeline of stages instead (region/keystage/README.md): the instance's",
    "--tp GPUs are the budget its key-stage scaler splits over the stages, each stage a queue with its own replicas.",
    "The JSON: {\"layersPerStage\": [20,20,20,20], \"profileTp\": 4, \"mode\": \"key-stage\"|\"whole-pipeline\",",
    "\"params\": {...keystage strategy parameters}, \"cluster\": {...}} (the config's keystage section; the region",
    "passes it for endpoints listed in keystage.pipelines). GET /tidegate/keystage reports the split; /metrics adds",
    "the tidegate_pipeline_* series: replicas, queue and key flag per stage, GPUs held, mode, replicas added/removed.",
    "The engine settings (--settings and the flags per setting) do not apply to a pipeline or a stage process (each",
    "stage replica serves one request at a time).",
    "",
    "--stage <json> runs ONE stage replica of a pipelined model as this process (region/keystage/stage-server.ts; what a",
    "node agent starts for a pipelined instance under keystage.stageProcesses): {\"layersPerStage\", \"profileTp\",",
    "\"stage\", \"loadMs\", \"windowMs\"}. It serves POST /tidegate/stage/run (activations in, the next stage's or its own",
    "tokens out as NDJSON), GET /tidegate/stage, POST /tidegate/stage/drain and /health (503 until loadMs has passed).",
    "",
    "Prefill/decode disaggregation (engines/sim/kv-transfer.ts), vLLM's contract: a request with",
    "kv_transfer_params {\"do_remote_decode\": true} (not streamed) is prefilled and answered with the kv_transfer_params",
    "a decode instance needs; a request carrying those params pulls the prompt's KV from the prefill instance through",
    "the native data plane (TCP) and decodes without computing the prompt. --role prefill|decode|both (default both)",
    "limits an instance to one half.",
    "",
    "Example: tidegate engine-sim --model llama3.1-8b --gpu h100-80gb --port 0 --time-scale 0.1",
  ].join("\n"),
  flags: {
    model: { type: "string", help: `model to serve (${Object.keys(MODEL_SPECS).join(", ")})` },
    gpu: { type: "string", help: `GPU type (${Object.keys(GPU_SPECS).join(", ")})`, default: "h100-80gb" },
    tp: { type: "number", help: "GPUs per instance (tensor parallelism); default: the embedded config's gpusPerInstance" },
    host: { type: "string", help: "address to listen on", default: "127.0.0.1" },
    "kv-host": { type: "string", help: "prefill/decode: the address other engines reach this one at for KV transfers (default: --host, or this machine's hostname when --host is 0.0.0.0 or ::)" },
    port: { type: "number", help: "port to listen on (0 = a free port)", default: 8000 },
    "time-scale": { type: "number", help: "multiply simulated durations (0.1 = 10x faster than measured)", default: 1 },
    ...settingsFlagSpecs(),
    "parameters-from": { type: "string", help: "node agent gRPC address host:port whose complete block store of --model this engine serves" },
    "tls-ca": { type: "string", help: "with --parameters-from: PEM CA that signs the agent's certificate (mTLS to the agent)" },
    "tls-cert": { type: "string", help: "with --parameters-from: PEM client certificate chain" },
    "tls-key": { type: "string", help: "with --parameters-from: PEM private key" },
    "tls-server-name": { type: "string", help: "with --parameters-from: the name the agent's certificate carries, when not its address" },
    pipeline: { type: "string", help: "serve the model as a pipeline of stages with key-stage scaling: JSON {layersPerStage, profileTp, mode?, params?, cluster?}; --tp is its GPU budget" },
    stage: { type: "string", help: "serve one stage replica of a pipelined model: JSON {layersPerStage, profileTp, stage, loadMs, windowMs}" },
    "parameters-wait-ms": { type: "number", help: "with --parameters-from: listen at once and answer 503 until the store is complete (within this many ms), instead of refusing to start" },
  },
  async run(flags) {
    const model = flags.model;
    if (typeof model !== "string" || MODEL_SPECS[model] === undefined) throw new TidegateError("invalid_request", `--model must be one of ${Object.keys(MODEL_SPECS).join(", ")}, or <one of them>:<tag> for a variant`);
    const gpu = String(flags.gpu);
    if (GPU_SPECS[gpu] === undefined) throw new TidegateError("invalid_request", `--gpu must be one of ${Object.keys(GPU_SPECS).join(", ")}`);
    const tp = typeof flags.tp === "number" ? flags.tp : defaultTp(model, gpu);
    if (tp === undefined || !Number.isInteger(tp) || tp < 1) throw new TidegateError("invalid_request", "--tp must be a positive integer");
    const port = Number(flags.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TidegateError("invalid_request", "--port must be an integer in 0..65535");
    const timeScale = Number(flags["time-scale"]);
    if (!(timeScale > 0 && timeScale <= 1000)) throw new TidegateError("invalid_request", "--time-scale must be in (0, 1000]");
    const settings = settingsFromFlags(flags);

    if (flags.stage !== undefined) {
      if (flags.pipeline !== undefined) throw new TidegateError("invalid_request", "--stage and --pipeline exclude each other (a stage process serves one stage of a pipeline)");
      refuseEngineSettings(settings, "do not apply to --stage (a stage replica serves one request at a time)");
      let spec: ReturnType<typeof parseStageSpec>;
      try {
        spec = parseStageSpec(String(flags.stage), model, gpu);
      } catch (err) {
        throw new TidegateError("invalid_request", (err as Error).message);
      }
      if (flags["parameters-from"] !== undefined) {
        const p = await parametersFrom(String(flags["parameters-from"]), model, undefined, tlsFromFlags(flags));
        if (typeof p === "string") {
          process.stderr.write(p + "\n");
          return 1;
        }
      }
      const wall = new WallClock();
      const server = new StageServer({ model, gpu, spec, clock: timeScale === 1 ? wall : new DilatedClock(wall, timeScale) });
      process.stdout.write((await server.listen(port, String(flags.host))) + "\n");
      await untilSignal();
      await server.close();
      return 0;
    }

    // A pipelined instance (--pipeline): checked before anything else starts.
    let pipeline: ReturnType<typeof parsePipelineSpec> | undefined;
    if (flags.pipeline !== undefined) {
      refuseEngineSettings(settings, "do not apply to --pipeline (a stage replica serves one request at a time)");
      try {
        pipeline = parsePipelineSpec(String(flags.pipeline), model, gpu, tp);
      } catch (err) {
        throw new TidegateError("invalid_request", (err as Error).message);
      }
    }

    const waitMs = flags["parameters-wait-ms"];
    if (waitMs !== undefined && !(typeof waitMs === "number" && waitMs > 0)) throw new TidegateError("invalid_request", "--parameters-wait-ms must be a positive number of ms");
    if (waitMs !== undefined && flags["parameters-from"] === undefined) throw new TidegateError("invalid_request", "--parameters-wait-ms goes with --parameters-from");
    const tls = tlsFromFlags(flags);
    let parameters: EngineParameters | undefined;
    if (flags["parameters-from"] !== undefined && waitMs === undefined) {
      const p = await parametersFrom(String(flags["parameters-from"]), model, undefined, tls);
      if (typeof p === "string") {
        process.stderr.write(p + "\n");
        return 1;
      }
      parameters = p;
    }

    const instanceId = `engine-sim/${model}/${gpu}/${process.pid}`;
    const clock = new WallClock();
    // The shared builder of simulated engines (what a region builds in process from the same settings).
    const engine: ServedEngine = newEngine(
      { instanceId, model, gpu, tp },
      { timeScale, settings, ...(pipeline === undefined ? {} : { pipeline }) },
      clock,
      // HiGHS loads only if the region pairs this engine under zigzag (serve while loading): not at start-up.
      { solver: async () => (await import("../../core/solver.js")).HighsSolver.create() },
    );
    const server = new EngineSimServer({ engine, clock, processMetrics: true, settings, tp, ...(typeof flags["kv-host"] === "string" ? { kvAdvertiseHost: flags["kv-host"] } : {}), ...(parameters !== undefined ? { parameters } : {}) });
    if (waitMs !== undefined) server.waitForParameters(`waiting for ${model}'s blocks on agent ${String(flags["parameters-from"])}`);
    const url = await server.listen(port, String(flags.host));
    process.stdout.write(url + "\n");
    if (waitMs !== undefined) {
      // Started while the blocks still arrive (the process start overlaps the transfer): serve once they are all here.
      const deadline = Date.now() + waitMs;
      const client = new AgentClient(String(flags["parameters-from"]), undefined, tls);
      let last = "";
      for (;;) {
        // Each poll's block count feeds a blitzscale cold start serving behind its blocks (POST /tidegate/lambda).
        const p = await parametersFrom(String(flags["parameters-from"]), model, client, undefined, (present, count) => server.blocks(present, count));
        if (typeof p !== "string") {
          server.ready(p);
          client.close();
          break;
        }
        last = p;
        if (Date.now() >= deadline) {
          process.stderr.write(`${last} (waited ${waitMs} ms for the blocks: --parameters-wait-ms)\n`);
          client.close();
          await server.close();
          return 1;
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    await untilSignal();
    await server.close().catch(() => undefined);
    return 0;
  },
};
