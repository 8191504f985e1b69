// Issue 48, real processes and real bytes with agent-started engines: `tidegate region` (agents mode) and `tidegate
// global` on the bridge's host side, one `tidegate agent` in each of two network namespaces (tbf-shaped links). The
// region's llama3.2-3b is a prefill pool and a decode pool (regions[].endpoints[].role), one instance each: the
// agents start their engine-sims with those roles (StartEngine's settings), one per namespace. Streams through the
// official `openai` client: the prompt's KV crosses the shaped links between the namespaces (the decode engine checks
// every byte), in the time the bandwidth allows; a `kill -9` of the region and a restart adopts both engines back into
// their pools; `kill -9` of the prefill engine in the middle of a transfer ends the request with an error within 3 s.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RegionInstances } from "../../core/ports.js";
import { ADMIN_KEY, processesWith, waitFor } from "../region/cluster.js";
import { killPrefillMidTransfer, streamKvAcross } from "./pd-checks.js";
import { startNetnsCluster, type NetnsCluster } from "./cluster.js";
import { netnsUnavailable } from "./topology.js";

const MODEL = "llama3.2-3b";
const GPU = "h100-80gb";
const RATE_MBIT = 200;
const why = netnsUnavailable();

let n: NetnsCluster | undefined;
let listing: RegionInstances;
const urlOf = (role: string) => listing.instances.find((i) => i.role === role && i.state === "serving")!.url;

describe.skipIf(why !== undefined)(`prefill and decode pools on agents across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  beforeAll(async () => {
    const ep = { model: MODEL, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 1 };
    n = await startNetnsCluster({
      name: "pd-agents",
      rates: [RATE_MBIT, RATE_MBIT],
      region: "r1",
      slots: 2,
      model: MODEL,
      serving: 2,
      withGlobal: true,
      config: {
        models: [{ name: MODEL, gpusPerInstance: { [GPU]: 2 } }],
        regions: [{ name: "r1", gpus: [{ type: GPU, count: 4 }], endpoints: [{ ...ep, role: "prefill" }, { ...ep, role: "decode" }] }],
        controller: { reconcileIntervalMs: 100, agentLostAfterMs: 5000 },
        router: { port: 0, adminKeys: [ADMIN_KEY] },
        routing: { pdMinPrefillTokens: 0 },
        engines: { startTimeoutMs: 30_000, timeScale: 0.1 },
        parameters: { stallMs: 3000, models: { [MODEL]: { bytes: 8 * 1024 * 1024, seed: 21 } } },
      },
    });
    listing = await n.cluster.listing();
  }, 180_000);

  afterAll(async () => {
    await n?.close();
  });

  it("the agents start one engine per pool, each with its role, on different nodes", () => {
    const serving = listing.instances.filter((i) => i.state === "serving");
    expect(serving.map((i) => i.role).sort()).toEqual(["decode", "prefill"]);
    expect(new Set(serving.map((i) => i.node)).size).toBe(2);
  });

  it("moves each prompt's KV between the namespaces at the shaped rate, checked byte for byte", async () => {
    await streamKvAcross({ routerUrl: n!.cluster.routerUrl, decodeUrl: urlOf("decode"), model: MODEL, rateMbit: RATE_MBIT, label: "agent-started engines" });
  }, 60_000);

  it("kill -9 of the region, restart: it adopts both engines back into their pools, and requests still split", async () => {
    const cl = n!.cluster;
    const before = new Map(listing.instances.filter((i) => i.state === "serving").map((i) => [i.id, i.role]));
    cl.region.child.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 300));
    await cl.startRegion();
    listing = await cl.serving(MODEL, 2, 90_000);
    // The same two engines (adopted, not started again), each back in its pool.
    expect(new Map(listing.instances.filter((i) => i.state === "serving").map((i) => [i.id, i.role]))).toEqual(before);
    expect(cl.logLines("adopting engine").length).toBeGreaterThanOrEqual(2);
    // The global router hears the new region process (its telemetry) before it routes there again.
    await waitFor("the router's readiness", async () => ((await fetch(`${cl.routerUrl}/readyz`)).status === 200 ? true : undefined), 30_000);
    await streamKvAcross({ routerUrl: cl.routerUrl, decodeUrl: urlOf("decode"), model: MODEL, rateMbit: RATE_MBIT, label: "after a region restart" });
  }, 150_000);

  it("kill -9 of the prefill engine in the middle of a transfer ends the request with an error within 3 s", async () => {
    // The agent started it with its pool's role in its settings (engine-sim --settings), under its keeper process.
    const pids = [...processesWith("engine-sim", '"role":"prefill"')].filter(([, cmd]) => !cmd.includes("keeper.js")).map(([pid]) => pid);
    expect(pids).toHaveLength(1);
    await killPrefillMidTransfer({ routerUrl: n!.cluster.routerUrl, prefillUrl: urlOf("prefill"), decodeUrl: urlOf("decode"), model: MODEL, kill: () => process.kill(pids[0]!, "SIGKILL"), label: "agent-started engines" });
  }, 60_000);
});
