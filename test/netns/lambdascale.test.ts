// λScale's execute-while-load across real processes (issue 35 item 3; λScale §4.3–4.4): `tidegate region` (agents
// mode, loading lambdascale) in the root namespace, four `tidegate agent`s in their own namespaces behind tbf-shaped
// links, the engines real `tidegate engine-sim` processes. Two instances serve (k = 2 complete copies); targets
// 2 → 4: the region multicasts the model with λScale's binomial pipeline from both copies in shifted chunk orders
// (k-way transmission), so the two new nodes form one execution pipeline once they together hold every block — about
// half-way through the load. One member's engine then serves with the pipeline's activation hop on every pass, and a
// request to it is answered while its own node still lacks blocks; when its copy completes it switches to local mode.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNetnsCluster, type NetnsCluster } from "./cluster.js";
import { netnsUnavailable } from "./topology.js";
import { waitFor } from "../region/cluster.js";

const MODEL = "llama3.1-8b";
const GPU = "h100-80gb";
const RATE_MBIT = 100;
const BYTES = 48 * 1024 * 1024;
const BLOCKS = 32;
const why = netnsUnavailable();

describe.skipIf(why !== undefined)(`λScale execute-while-load across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  let n: NetnsCluster | undefined;
  beforeAll(async () => {
    n = await startNetnsCluster({
      name: "lambdascale",
      rates: [RATE_MBIT, RATE_MBIT, RATE_MBIT, RATE_MBIT],
      region: "r1",
      slots: 2,
      model: MODEL,
      serving: 2,
      config: {
        models: [{ name: MODEL, gpusPerInstance: { [GPU]: 2 } }],
        regions: [{ name: "r1", gpus: [{ type: GPU, count: 8 }], endpoints: [{ model: MODEL, gpu: GPU, instances: 2, minInstances: 1, maxInstances: 4 }] }],
        controller: { strategy: "lt-i", reconcileIntervalMs: 100, agentLostAfterMs: 5000, loading: { source: "lambdascale" } },
        engines: { startTimeoutMs: 60_000, timeScale: 1 },
        parameters: { stallMs: 3000, blockCount: BLOCKS, models: { [MODEL]: { bytes: BYTES, seed: 7 } } },
      },
    });
  }, 240_000);
  afterAll(async () => {
    await n?.close();
  });

  it("2 → 4: the pipeline's head serves before its load completes, answers a request with the hop on every pass, then switches to local mode", async () => {
    const cl = n!.cluster;
    await cl.target(MODEL, GPU, 4);
    const formed = await waitFor(
      "a λScale pipeline serving while it loads",
      () => cl.logLines<{ instanceId: string; nodes: string[]; hops: number; passOverheadMs: number; heldBlocks: number[] }>("λScale execution pipeline serving while it loads")[0],
      120_000,
      () => cl.region.output().slice(-6000),
    );
    expect(formed.nodes).toHaveLength(2);
    expect(formed.hops).toBe(1);
    expect(formed.passOverheadMs).toBeGreaterThan(0);
    // Formed about half-way: the members together hold every block, neither holds them all.
    expect(formed.heldBlocks.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(BLOCKS);
    expect(Math.max(...formed.heldBlocks)).toBeLessThan(BLOCKS);
    const head = await waitFor("the head listed serving", async () => (await cl.listing()).instances.find((i) => i.id === formed.instanceId && i.state === "serving" && i.url !== ""), 30_000);
    const node = cl.agents.get(head.node)!;
    const lambda = async () => (await (await fetch(new URL("/tidegate/lambda", head.url))).json()) as { mode: string; passOverheadMs: number; waiting: boolean };
    const present = async () => (await node.client.info()).stores.find((s) => s.model === MODEL)!.present;

    // While its node still lacks blocks the head serves as the pipeline: a request is answered.
    const before = { lambda: await lambda(), present: await present() };
    const res = await fetch(new URL("/v1/completions", head.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "the tide comes in", max_tokens: 4 }) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { text: string }[]; usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(4);
    expect(body.choices[0]!.text.length).toBeGreaterThan(0);
    const after = { lambda: await lambda(), present: await present() };
    expect(before.lambda).toEqual({ mode: "pipeline", passOverheadMs: formed.passOverheadMs, waiting: false });
    expect(before.present).toBeLessThan(BLOCKS);
    // Answered before the head's own copy was complete (the 48 MiB load at 100 Mbit/s takes ~4 s; formation ~half).
    expect(after.lambda.mode).toBe("pipeline");
    expect(after.present).toBeLessThan(BLOCKS);

    const l = await cl.serving(MODEL, 4, 120_000);
    expect(l.instances.filter((i) => i.model === MODEL && i.state === "serving")).toHaveLength(4);
    await waitFor("local mode", () => cl.logLines<{ instanceId: string }>("λScale pipeline head switched to local mode").find((x) => x.instanceId === head.id), 30_000);
    expect(await lambda()).toEqual({ mode: "local", passOverheadMs: 0, waiting: false });
    expect(await present()).toBe(BLOCKS);
    const t = cl.logLines<{ algorithm: string; sources: string[]; targets: string[] }>("transfer started").at(-1)!;
    expect(t.algorithm).toBe("binomial");
    expect(t.sources).toHaveLength(2);
    expect(t.targets).toHaveLength(2);
  });
});
