// `tidegate dev` on the sim actuator with a loading source in its config (controller.loading, one region's own
// regions[].loading): the running regions load from it, and the planner's hourly report shows each endpoint's
// expected scale-out time from it — the VM provisioning of the sim actuator's delays plus the source's load at
// BlitzScale Table 1's bandwidths, instead of SageServe's 10-minute load constant. Driven as a user would: a config
// file, the dev process, its plans API with the admin key it prints.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnTidegate, stopAll, type Proc } from "./procs.js";

let dir: string;
let dev: Proc;
let base: string;
let key: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-dev-loading-"));
  const file = join(dir, "dev.json");
  const region = (name: string, loading?: unknown) => ({
    name,
    gpus: [{ type: "h100-80gb", count: 32 }],
    endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 4 }],
    ...(loading === undefined ? {} : { loading }),
  });
  writeFileSync(
    file,
    JSON.stringify({
      models: [{ name: "llama2-70b", gpusPerInstance: { "h100-80gb": 4 } }],
      regions: [region("east"), region("west", { source: "ssd" })],
      router: { port: 0 },
      queue: { dataDir: join(dir, "data") },
      controller: { actuator: "sim", loading: { source: "blitzscale" } },
    }),
  );
  dev = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "warn"], /serving (http:\/\/127\.0\.0\.1:\d+)[\s\S]*admin key (tg-admin-\S+)/, 60_000);
  base = dev.match[1]!;
  key = dev.match[2]!;
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

interface Action {
  model: string;
  region: string;
  expectedScaleOutMs?: number;
}

/** The newest plan's actions once every region has reported its expected scale-out (a new round if needed). */
async function planActions(): Promise<Action[]> {
  const auth = { authorization: `Bearer ${key}`, accept: "application/json" };
  for (let i = 0; i < 100; i++) {
    const list = (await (await fetch(`${base}/plans`, { headers: auth })).json()) as { data: { id: string }[] };
    const id = list.data[0]?.id;
    if (id !== undefined) {
      const report = (await (await fetch(`${base}/plans/${id}.json`, { headers: auth })).json()) as { actions: Action[] };
      if (report.actions.length === 2 && report.actions.every((a) => a.expectedScaleOutMs !== undefined)) return report.actions;
      // the first round may have run before the regions' first telemetry: ask for another
      if (i % 10 === 9) await fetch(`${base}/plans/now`, { method: "POST", headers: auth });
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no plan with every region's expected scale-out:\n${dev.output().slice(-2000)}`);
}

describe("tidegate dev with controller.loading", () => {
  it("plans with each region's scale-out time from its loading source: a 2.8 s RDMA chain (east), a 28 s SSD load (west)", async () => {
    const actions = await planActions();
    const ms = Object.fromEntries(actions.map((a) => [a.region, a.expectedScaleOutMs!]));
    // llama2-70b: 35 GB per GPU (TP4); 12.5 GB/s over RDMA, 1.25 GB/s from SSD; after the sim actuator's 300 s VM
    // provisioning (SageServe §7.1: no spot instance to reclaim in this fleet)
    expect(ms.east! - 300_000).toBeCloseTo(2800, -1);
    expect(ms.west! - 300_000).toBeCloseTo(28_000, -2);
    // without a loading key the sim actuator charges SageServe's 600 s local redeploy for the load
    expect(ms.east!).toBeLessThan(300_000 + 600_000);
    expect(dev.output()).toContain("loads from east blitzscale/zigzag, west ssd/stop-the-world");
  }, 60_000);
});
