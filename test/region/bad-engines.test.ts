// Bad input to a scaling region (real processes on loopback): an engine command that exits at once, an engine that
// never becomes healthy. Each gets a clear error in the region's log and in the admin listing, the controller
// retries with backoff (not every pass), and no engine process is left behind.
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stopAll } from "../e2e/procs.js";
import { Cluster, processesWith, waitFor } from "./cluster.js";

const MODEL = "llama3.2-3b";
const GPU = "h100-80gb";
const dirs: string[] = [];
const clusters: Cluster[] = [];

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
  await stopAll();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function cluster(commandTemplate: string, startTimeoutMs: number): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), "tidegate-bad-engines-"));
  dirs.push(dir);
  const c = new Cluster({
    dir,
    region: "r1",
    config: {
      models: [{ name: MODEL, gpusPerInstance: { [GPU]: 2 } }],
      regions: [{ name: "r1", gpus: [{ type: GPU, count: 2 }], endpoints: [{ model: MODEL, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 1 }] }],
      controller: { reconcileIntervalMs: 100, retryInitialMs: 500, retryMaxMs: 4000, agentLostAfterMs: 3000 },
      engines: { commandTemplate, startTimeoutMs, stopGraceMs: 500 },
      parameters: { models: { [MODEL]: { bytes: 4 * 1024 * 1024 } } },
    },
    agents: [{ nodeId: "n1", host: "127.0.0.1", slots: 2 }],
  });
  clusters.push(c);
  await c.start();
  return c;
}

describe("bad engines in a scaling region", () => {
  it("a command template that exits at once: its exit and stderr in the log and listing, retried with backoff", async () => {
    const c = await cluster("false {port}", 5000);
    const l = await waitFor("two failed starts", async () => {
      const x = await c.listing();
      return x.failures.filter((f) => /exited/.test(f.message)).length >= 2 ? x : undefined;
    }, 30_000, () => c.region.output().slice(-3000));
    const f = l.failures.find((x) => /exited/.test(x.message))!;
    expect(f.message).toMatch(/engine of r1\/n1\/llama3\.2-3b\/\S+ exited: exited with code 1/);
    expect(c.logLines("scale-out failed; backing off").length).toBeGreaterThanOrEqual(2);
    // backoff: 500, 1000, 2000, 4000 ms — a handful of tries in 6 s, not one per 100 ms pass
    await new Promise((r) => setTimeout(r, 6000));
    const tries = (await c.listing()).failures.filter((x) => /exited/.test(x.message)).length;
    expect(tries).toBeLessThanOrEqual(7);
    expect(l.instances.filter((i) => i.state === "serving")).toHaveLength(0);
  }, 60_000);

  it("an engine that never answers its health check: a timeout naming the config key, and no process left behind", async () => {
    const c = await cluster("sleep 30 {port}", 1500);
    const l = await waitFor("a health-check timeout", async () => {
      const x = await c.listing();
      return x.failures.some((f) => /did not answer its health check within 1500 ms \(engines\.startTimeoutMs\)/.test(f.message)) ? x : undefined;
    }, 30_000, () => c.region.output().slice(-3000));
    expect(l.failures[0]!.node).toBe("n1");
    // The unhealthy engine was stopped: at most the one being tried now runs.
    await new Promise((r) => setTimeout(r, 500));
    const engines = () => [...processesWith("sleep 30").values()].filter((cmd) => cmd.startsWith("sleep 30 ")).length;
    expect(engines()).toBeLessThanOrEqual(1);
    // Stopping the agent leaves none (the keeper kills the engine's process group).
    await c.stop();
    await waitFor("no sleep engine left", () => (engines() === 0 ? true : undefined), 10_000);
  }, 60_000);
});
