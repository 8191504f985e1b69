/**
 * A multi-process batch fleet for tests that kill things or soak: three `tidegate region` processes (static
 * actuator, simulated engines) and a `tidegate global`, on a Redis queue; the check that a batch's output holds every
 * custom_id exactly once; one streamed chat completion with its TTFT.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { freePort, spawnTidegate, type Proc } from "../e2e/procs.js";

export const FLEET_MODEL = "llama3.2-3b";
export const FLEET_REGIONS = ["us-east", "us-central", "us-west"] as const;

/** Writes the fleet's config into `dir` and returns its path; `queue` and `router` are merged over the defaults. */
export async function writeFleetConfig(dir: string, queue: Record<string, unknown>, router: Record<string, unknown> = {}): Promise<string> {
  const names = [...FLEET_REGIONS];
  const ports = await Promise.all(names.map(() => freePort()));
  const config = {
    models: [{ name: FLEET_MODEL, gpusPerInstance: { "a100-80gb": 2, "h100-80gb": 2 } }],
    regions: names.map((name, i) => ({
      name,
      proximity: names.filter((n) => n !== name),
      grpcAddress: `127.0.0.1:${ports[i]}`,
      gpus: [{ type: "h100-80gb", count: 8 }, { type: "a100-80gb", count: 8 }],
      endpoints: [
        { model: FLEET_MODEL, gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 4 },
        { model: FLEET_MODEL, gpu: "a100-80gb", instances: 2, minInstances: 1, maxInstances: 4 },
      ],
    })),
    router,
    queue: { backend: "redis", leaseMs: 3000, ...queue },
    // Requests long enough (32 tokens at 0.2× measured time) that many are always in flight when a fault lands.
    engines: { timeScale: 0.2 },
    controller: { actuator: "static" },
  };
  const file = join(dir, "fleet.json");
  writeFileSync(file, JSON.stringify(config));
  return file;
}

export const startRegion = (config: string, region: string): Promise<Proc> =>
  spawnTidegate(`region ${region}`, ["region", "--config", config, "--region", region, "--log-level", "warn"], new RegExp(`tidegate region ${region}: grpc`));

/** `keepChars` bounds the output kept for `output()` (spawnTidegate's default when absent). */
export const startGlobal = (config: string, logLevel = "error", keepChars?: number): Promise<Proc> =>
  spawnTidegate("global", ["global", "--config", config, "--port", "0", "--telemetry-interval-ms", "50", "--log-level", logLevel], /serving (http:\/\/[^\s]+)/, undefined, keepChars);

/** SIGKILL; resolves once it exited. */
export async function killHard(p: Proc): Promise<void> {
  const exited = new Promise((r) => p.child.once("exit", r));
  p.child.kill("SIGKILL");
  await exited;
}

/** `lines` (a parsed output file) hold `req-0` … `req-<n−1>` each exactly once, every one a 200. */
export function expectEachCustomIdOnce(lines: Record<string, unknown>[], n: number): void {
  expect(lines).toHaveLength(n);
  const seen = new Set<string>();
  for (const l of lines) {
    expect(seen.has(l.custom_id as string)).toBe(false);
    seen.add(l.custom_id as string);
    expect((l.response as { status_code: number }).status_code).toBe(200);
  }
  for (let i = 0; i < n; i++) expect(seen.has(`req-${i}`)).toBe(true);
}

/**
 * One streamed chat completion of `maxTokens` tokens through the router at `base`: time to first byte of the body
 * (NaN when it failed) and whether it ended with [DONE] and no in-stream error.
 */
export async function streamChatOnce(base: string, maxTokens: number): Promise<{ ttftMs: number; ok: boolean }> {
  const started = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: FLEET_MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, stream: true }),
  });
  if (res.status !== 200 || res.body === null) {
    await res.body?.cancel();
    return { ttftMs: Number.NaN, ok: false };
  }
  let ttftMs = Number.NaN;
  let tail = "";
  for await (const chunk of res.body) {
    if (Number.isNaN(ttftMs)) ttftMs = performance.now() - started;
    tail = (tail + Buffer.from(chunk as Uint8Array).toString()).slice(-256);
  }
  return { ttftMs, ok: tail.includes("data: [DONE]") && !tail.includes('"error"') };
}

