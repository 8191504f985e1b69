/**
 * Test harness for the batch tier end to end: the Batch/Files sub-app and the dispatcher (router/batch/service.ts)
 * served over real HTTP on 127.0.0.1:0, with scriptable in-memory regions (test/helpers/fake-link.ts) whose telemetry a
 * pump emits every `telemetryMs` at the utilization `utilization(region)` returns.
 */
import { Hono } from "hono";
import { serve, type ServerType } from "@hono/node-server";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { WallClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig, type TidegateConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { createRegistry, type Registry } from "../../core/metrics.js";
import { FakeRegionLink } from "../helpers/fake-link.js";
import { createBatchService, type BatchService } from "../../router/batch/service.js";

export interface Harness {
  client: OpenAI;
  baseUrl: string;
  config: TidegateConfig;
  service: BatchService;
  links: FakeRegionLink[];
  registry: Registry;
  /** Current utilization per region (all models); change it to steer dispatch. */
  utilization: Map<string, number>;
  dataDir: string;
  close(keepData?: boolean): Promise<void>;
}

export interface HarnessOptions {
  queue?: Record<string, unknown>;
  router?: Record<string, unknown>;
  telemetryMs?: number;
  /** Reuse this data dir (restart tests). */
  dataDir?: string;
  initialUtilization?: number;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "tidegate-batch-"));
  const config = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), queue: { backend: "embedded", dataDir, ...opts.queue }, ...(opts.router === undefined ? {} : { router: opts.router }) });
  const clock = new WallClock();
  const links = config.regions.map((r) => new FakeRegionLink(r.name));
  const utilization = new Map(links.map((l) => [l.region, opts.initialUtilization ?? 0.3]));
  const registry = createRegistry(false);
  const service = createBatchService({ config, clock, maintenanceIntervalMs: 50, intakeGraceMs: 500 });
  service.start(links, registry);
  const models = config.models.map((m) => m.name);
  const pump = setInterval(() => {
    for (const l of links) l.emitTelemetry(Object.fromEntries(models.map((m) => [m, utilization.get(l.region)!])));
  }, opts.telemetryMs ?? 10);
  const app = new Hono().route("/v1", service.routes);
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;
  const baseUrl = `http://127.0.0.1:${port}/v1`;
  const client = new OpenAI({ apiKey: "test", baseURL: baseUrl, maxRetries: 0 });
  return {
    client, baseUrl, config, service, links, registry, utilization, dataDir,
    close: async (keepData = false) => {
      clearInterval(pump);
      await service.close();
      await new Promise<void>((r) => server.close(() => r()));
      if (!keepData && opts.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** JSONL of `n` chat requests for `model` with custom ids `req-0`…; `maxTokens` output tokens each. */
export function chatJsonl(n: number, model = "llama3.2-3b", maxTokens = 3): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    lines.push(JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/chat/completions", body: { model, messages: [{ role: "user", content: `question ${i}` }], max_tokens: maxTokens } }));
  }
  return lines.join("\n") + "\n";
}

/** Polls `batches.retrieve` until `done(status)` or the deadline. */
export async function pollBatch(client: OpenAI, id: string, done: (s: string) => boolean, timeoutMs = 30_000): Promise<OpenAI.Batches.Batch> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (done(b.status)) return b;
    if (Date.now() > deadline) throw new Error(`batch ${id} still ${b.status} after ${timeoutMs} ms: ${JSON.stringify(b.request_counts)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Parses a JSONL file's lines. */
export function parseJsonl(text: string): Record<string, unknown>[] {
  return text.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as Record<string, unknown>);
}
