/**
 * Two global-router replicas on one Redis: a file uploaded through one is usable through the other, both
 * dispatchers claim from the same queue, and every custom_id is answered exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hono } from "hono";
import { serve, type ServerType } from "@hono/node-server";
import OpenAI, { toFile } from "openai";
import { WallClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { FakeRegionLink } from "../helpers/fake-link.js";
import { createBatchService, type BatchService } from "../../router/batch/service.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../helpers/redis.js";
import { chatJsonl, parseJsonl, pollBatch } from "./harness.js";

let redis: TestRedis;
const prefix = testPrefix("replicas");
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await cleanupPrefix(redis.url, prefix);
  await redis.stop();
});

interface Replica {
  client: OpenAI;
  service: BatchService;
  links: FakeRegionLink[];
  close(): Promise<void>;
}

async function replica(): Promise<Replica> {
  const config = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), queue: { backend: "redis", redisUrl: redis.url, keyPrefix: prefix } });
  const links = config.regions.map((r) => new FakeRegionLink(r.name));
  const service = createBatchService({ config, clock: new WallClock(), maintenanceIntervalMs: 50, intakeGraceMs: 500 });
  service.start(links);
  const pump = setInterval(() => {
    for (const l of links) l.emitTelemetry({ "llama3.2-3b": 0.3 });
  }, 10);
  const app = new Hono().route("/v1", service.routes);
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;
  return {
    client: new OpenAI({ apiKey: "x", baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 }),
    service,
    links,
    close: async () => {
      clearInterval(pump);
      await service.close();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe("router replicas sharing Redis", () => {
  it("share files and the queue; both dispatch; each custom_id answered once", async () => {
    const a = await replica();
    const b = await replica();
    try {
      const n = 600;
      const file = await a.client.files.create({ file: await toFile(Buffer.from(chatJsonl(n)), "in.jsonl"), purpose: "batch" });
      expect((await b.client.files.retrieve(file.id)).bytes).toBe(file.bytes);
      const batch = await b.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const done = await pollBatch(a.client, batch.id, (s) => s === "completed");
      expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
      const lines = parseJsonl(await (await b.client.files.content(done.output_file_id!)).text());
      expect(new Set(lines.map((l) => l.custom_id)).size).toBe(n);
      expect(lines).toHaveLength(n);
      const sentA = a.links.reduce((s, l) => s + l.dispatches.length, 0);
      const sentB = b.links.reduce((s, l) => s + l.dispatches.length, 0);
      console.log(`replicas: A sent ${sentA}, B sent ${sentB}`);
      expect(sentA).toBeGreaterThan(0);
      expect(sentB).toBeGreaterThan(0);
      expect(sentA + sentB).toBe(n);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
