// A running region scales across emulated hosts: every `tidegate agent` in its own network namespace with a
// tbf-shaped link, `tidegate region` (agents mode) in the root namespace on the bridge. Targets 1 → 3: the blocks
// cross the shaped links, the new engines (inside the namespaces) serve; 3 → 1: two drain to spot.
import { describe, expect, it } from "vitest";
import { netnsClusterSuite } from "./cluster.js";
import { netnsUnavailable } from "./topology.js";

const MODEL = "llama3.2-3b";
const GPU = "h100-80gb";
const RATE_MBIT = 400;
const BYTES = 32 * 1024 * 1024;
const why = netnsUnavailable();

describe.skipIf(why !== undefined)(`a region scaling across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  const cluster = netnsClusterSuite({
    name: "scaling",
    rates: [RATE_MBIT, RATE_MBIT, RATE_MBIT],
    model: MODEL,
    gpu: GPU,
    tp: 2,
    max: 3,
    extra: {
      controller: { strategy: "lt-i", reconcileIntervalMs: 100, agentLostAfterMs: 5000 },
      engines: { startTimeoutMs: 30_000 },
      parameters: { stallMs: 3000, models: { [MODEL]: { bytes: BYTES, seed: 21 } } },
    },
  });

  it("1 → 3 moves the blocks over the shaped links and the new engines serve; 3 → 1 drains two to spot", async () => {
    const cl = cluster();
    await cl.target(MODEL, GPU, 3);
    const l = await cl.serving(MODEL, 3, 120_000);
    const serving = l.instances.filter((i) => i.state === "serving");
    expect(new Set(serving.map((i) => i.node)).size).toBe(3);
    const t = cl.logLines<{ model: string; completed: string[]; elapsedMs: number }>("transfer finished").filter((x) => x.model === MODEL && x.completed.length === 2);
    expect(t).toHaveLength(1);
    // 32 MiB over a 400 Mbit/s link takes ≥ 0.67 s: the bytes really crossed the shaped links.
    expect(t[0]!.elapsedMs).toBeGreaterThan((BYTES * 8) / (RATE_MBIT * 1e6) * 1000 * 0.9);
    for (const i of serving) {
      expect(await cl.agents.get(i.node)!.client.verify(MODEL, 21)).toMatchObject({ firstMismatch: -1 });
      const res = await fetch(new URL("/v1/completions", i.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "hi", max_tokens: 3 }) });
      expect(res.status).toBe(200);
    }
    await cl.target(MODEL, GPU, 1);
    const end = await cl.serving(MODEL, 1, 60_000);
    expect(end.instances.filter((i) => i.state === "spot")).toHaveLength(2);
  }, 240_000);
});
