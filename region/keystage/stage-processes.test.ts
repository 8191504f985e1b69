// Stage replicas as processes (issue 35 item 2): real `tidegate engine-sim --stage` processes started through the
// agents' engine host (EngineSupervisor, as `tidegate agent` and dev's in-process agents run them). First the wire
// between stage processes (activations in, tokens back along the chain, drain, loading, a wrong activation size);
// then the head (StagedPipelineEngine): its key-stage scaler places stage processes on nodes that hold the model
// (the stage cache), a burst grows the key stage by starting more of them, and tokens stream to the caller.
// Needs the build (dist/) for the CLI and the keeper.
import { afterAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import { syntheticToken } from "../../core/openai.js";
import type { EngineSpec } from "../../nodes/agent/handle.js";
import { EngineSupervisor } from "../../nodes/agent/engine-supervisor.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import type { KeyStageParams } from "../strategies/keystage.js";
import { DEFAULT_CLUSTER } from "./keystage-config.js";
import type { PipelineSpec } from "./pipeline-engine.js";
import { StagedPipelineEngine, type StageNode } from "./staged-engine.js";
import { STAGE_HEADER, stageSpecJson, type StageStatus } from "./stage-server.js";
import { Pipeline } from "./stages.js";
import { pidAlive } from "../../test/helpers/processes.js";

const MODEL = "llama2-70b";
const GPU = "h100-80gb";
const LAYOUT = { layersPerStage: [32, 16, 16, 16], profileTp: 4, hiddenSize: 8192 };
const supervisors: EngineSupervisor[] = [];

function supervisor(): EngineSupervisor {
  const s = new EngineSupervisor({ engineHost: "127.0.0.1", parametersFrom: () => "", log: silentLogger });
  supervisors.push(s);
  return s;
}

afterAll(async () => {
  await Promise.all(supervisors.map((s) => s.close()));
});

async function lines(res: Response): Promise<{ t?: string; done?: boolean; error?: string }[]> {
  return (await res.text())
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { t?: string; done?: boolean; error?: string });
}

const status = async (url: string): Promise<StageStatus> => (await (await fetch(`${url}/tidegate/stage`)).json()) as StageStatus;

/**
 * A head over nodes A, B, C, … (8 slots each, the given free slots and stores), each node an EngineSupervisor that
 * spawns real stage processes; `started` lists every StartEngine in order with its node.
 */
function stagedHead(layout: { freeSlots: number; holdsModel: boolean }[]): { head: StagedPipelineEngine; started: { node: string; spec: EngineSpec; pid: number }[] } {
  const started: { node: string; spec: EngineSpec; pid: number }[] = [];
  const hosts = layout.map((_, j) => {
    const sup = supervisor();
    const nodeId = `node-${"ABCDEFGH"[j]}`;
    return {
      nodeId,
      startEngine: async (spec: EngineSpec) => {
        const info = await sup.start(spec);
        started.push({ node: nodeId, spec, pid: info.pid });
        return info;
      },
      stopEngine: (id: string, graceMs: number) => sup.stop(id, graceMs),
    };
  });
  const nodes = (): StageNode[] => layout.map((n, j) => ({ host: hosts[j]!, slots: 8, ...n }));
  const params = resolveStrategy("keystage", { intervalMs: 1000, windowMs: 10_000 }, "params").params as KeyStageParams;
  const spec: PipelineSpec = { ...LAYOUT, mode: "key-stage", params, cluster: DEFAULT_CLUSTER };
  return { head: new StagedPipelineEngine({ instanceId: "r/llama", model: MODEL, gpu: GPU, gpus: 8, spec, clock: new WallClock(), timeScale: 0.1, nodes, log: silentLogger }), started };
}

/** `callers` concurrent callers, `each` requests one after another; resolves with every text. */
async function burst(head: StagedPipelineEngine, callers: number, each: number): Promise<string[]> {
  const texts: string[] = [];
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let k = 0; k < each; k++) {
        let text = "";
        let done = false;
        for await (const ev of head.generate({ id: `c${c}-${k}`, model: MODEL, kind: "chat", promptTokens: 512, maxTokens: 32, priority: 0, body: {} })) {
          if (ev.type === "token") text += ev.text;
          if (ev.type === "done") done = true;
        }
        expect(done).toBe(true);
        texts.push(text);
      }
    }),
  );
  return texts;
}

describe("stage processes", () => {
  it("pass activations stage to stage and stream the last stage's tokens back along the chain", async () => {
    const sup = supervisor();
    const start = async (stage: number, k: number, loadMs = 0) => {
      const info = await sup.start({ instanceId: `t/${stage}/${k}`, model: MODEL, gpu: GPU, gpus: 1, timeScale: 0.05, stage: stageSpecJson({ ...LAYOUT, stage, loadMs, windowMs: 3_600_000 }) });
      expect(info.state, info.detail).toBe("running");
      return info.url;
    };
    const [s0, s1a, s1b, s2, s3] = await Promise.all([start(0, 0), start(1, 0), start(1, 1), start(2, 0), start(3, 0)]);
    // A draining replica refuses; the stage before it moves on to the other candidate.
    expect((await fetch(`${s1a}/tidegate/stage/drain`, { method: "POST" })).status).toBe(200);
    const meta = { id: "req-1", seed: 42, promptTokens: 100, outputTokens: 8, next: [[s1a!, s1b!], [s2!], [s3!]] };
    const res = await fetch(`${s0}/tidegate/stage/run`, { method: "POST", headers: { [STAGE_HEADER]: JSON.stringify(meta) }, body: new Uint8Array(0) });
    expect(res.status).toBe(200);
    const out = await lines(res);
    expect(out.slice(0, 8).map((l) => l.t)).toEqual(Array.from({ length: 8 }, (_, i) => syntheticToken(42, i)));
    expect(out[8]).toEqual({ done: true });
    const [st0, st1a, st1b, st2, st3] = (await Promise.all([s0, s1a, s1b, s2, s3].map((u) => status(u!)))) as [StageStatus, StageStatus, StageStatus, StageStatus, StageStatus];
    expect([st0.served, st1a.served, st1b.served, st2.served, st3.served]).toEqual([1, 0, 1, 1, 1]);
    expect(st1a.draining).toBe(true);
    // Each stage served for its share of the request (stage 0 holds twice the layers of the others).
    const p = new Pipeline({ model: MODEL, gpu: GPU, ...LAYOUT });
    expect(st0.servicesAgoMs[0]![1]).toBeCloseTo(p.stageMs(0, 100, 8), 6);
    expect(st2.servicesAgoMs[0]![1]).toBeCloseTo(p.stageMs(2, 100, 8), 6);

    // The activations must be hidden × 2 bytes × tokens.
    const bad = await fetch(`${s1b}/tidegate/stage/run`, { method: "POST", headers: { [STAGE_HEADER]: JSON.stringify({ ...meta, next: [[s2!], [s3!]] }) }, body: new Uint8Array(10) });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain(`stage 1 expects ${p.activationBytes(100, 8)} bytes of activations for 100+8 tokens, got 10`);

    // Every later stage refusing: the request ends with an error line naming the stage.
    expect((await fetch(`${s1b}/tidegate/stage/drain`, { method: "POST" })).status).toBe(200);
    const refused = await lines(await fetch(`${s0}/tidegate/stage/run`, { method: "POST", headers: { [STAGE_HEADER]: JSON.stringify(meta) }, body: new Uint8Array(0) }));
    expect(refused.at(-1)?.error).toMatch(/^stage 1: no replica took the request \(.*503/);

    // A replica whose parameters are still being copied in answers 503 "loading" (600 s model time = 30 s wall here).
    const loading = await start(2, 1, 600_000);
    const h = await fetch(`${loading}/health`);
    expect(h.status).toBe(503);
    expect(await h.json()).toEqual({ status: "loading", stage: 2 });
  }, 60_000);

  it("the head's key-stage scaler grows the key stage by starting stage processes on nodes that cache it; tokens stream; a lost process is replaced", async () => {
    // Three nodes: A and B hold the model's blocks (every stage cached in host memory), C does not.
    const { head, started } = stagedHead([
      { freeSlots: 4, holdsModel: true },
      { freeSlots: 8, holdsModel: true },
      { freeSlots: 8, holdsModel: false },
    ]);
    try {
      let peak0 = 0;
      let peakHeld = 0;
      let stop = false;
      const watch = (async () => {
        while (!stop) {
          const s = head.pipelineSummary();
          peak0 = Math.max(peak0, s.stages[0]!.replicas);
          peakHeld = Math.max(peakHeld, s.heldGpus);
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      // 12 concurrent callers, 4 requests each, one after another: stage 0 (32 of 80 layers) queues.
      const texts = await burst(head, 12, 4);
      stop = true;
      await watch;
      expect(texts).toHaveLength(48);
      for (const t of texts) expect(t.trim().split(/\s+/)).toHaveLength(32);
      const summary = head.pipelineSummary();
      const detail = JSON.stringify({ peak0, peakHeld, summary, stats: head.scaler.stats, started: started.map((s) => s.node) });
      // The key stage grew: more than one stage-0 process served at once, every start a stage-cache hit.
      expect(peak0, detail).toBeGreaterThan(1);
      expect(head.scaler.stats.added, detail).toBeGreaterThan(0);
      expect(head.scaler.stats.cacheHits, detail).toBe(head.scaler.stats.added);
      expect(head.scaler.stats.cacheMisses, detail).toBe(0);
      expect(peakHeld, detail).toBeLessThanOrEqual(8);
      // Stage processes ran only on nodes holding the model; the grown key stage's processes went to B (QUART §4.3:
      // plentiful GPUs, the cached server with the most free GPUs).
      expect(started.every((s) => s.node !== "node-C"), detail).toBe(true);
      const grown = started.filter((s) => JSON.parse(s.spec.stage!).stage === 0 && s.node === "node-B");
      expect(grown.length, detail).toBeGreaterThan(0);
      // Their start: fork + the stage's bytes over PCIe (cache.ts startMs, a hit), in model ms.
      const p = new Pipeline({ model: MODEL, gpu: GPU, ...LAYOUT });
      expect(JSON.parse(grown[0]!.spec.stage!).loadMs).toBeCloseTo(DEFAULT_CLUSTER.forkMs + (p.stageBytes[0]! / DEFAULT_CLUSTER.pcieBytesPerS) * 1000, 6);
      expect(summary.processes!.length).toBeGreaterThanOrEqual(4);

      // A stage process that dies (kill -9) is lost after 3 unanswered polls: out of the routes, its GPU back (the
      // scaler starts another when that leaves the stage below its keep); requests keep flowing through the stage.
      const victim = head.fleet.replicas(3).find((r) => r.state === "serving")!;
      process.kill(victim.pid, "SIGKILL");
      const deadline = Date.now() + 30_000;
      while (!(head.fleet.all().every((r) => r.pid !== victim.pid) && head.fleet.replicas(3).some((r) => r.state === "serving"))) {
        if (Date.now() > deadline) throw new Error(`stage 3 not replaced after its process died: ${JSON.stringify(head.pipelineSummary())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      let tokens = 0;
      for await (const ev of head.generate({ id: "after-loss", model: MODEL, kind: "chat", promptTokens: 64, maxTokens: 8, priority: 0, body: {} })) if (ev.type === "token") tokens++;
      expect(tokens).toBe(8);
    } finally {
      await head.close();
    }
    // Closing the head stops every stage process.
    for (const s of started) if (s.pid > 0) expect(pidAlive(s.pid), `pid ${s.pid}`).toBe(false);
  }, 120_000);

  it("under GPU contention the key stage's new processes are dispersed over nodes (KL placement, QUART §6.2 Eq. 8–10)", async () => {
    // Nodes A, B, D with 3 free slots each, C without the model: no node has half its GPUs free, so key replicas are
    // placed by the KL dispersion (other stages are packed densely); the first 4 (one per stage, not key) fill A, then B.
    // (`started` is in the order the starts completed, not the order they were placed.)
    const { head, started } = stagedHead([
      { freeSlots: 3, holdsModel: true },
      { freeSlots: 3, holdsModel: true },
      { freeSlots: 8, holdsModel: false },
      { freeSlots: 3, holdsModel: true },
    ]);
    try {
      const texts = await burst(head, 16, 4);
      expect(texts).toHaveLength(64);
      const initial = started.slice(0, 4).map((s) => s.node);
      const grown0 = started.slice(4).filter((s) => JSON.parse(s.spec.stage!).stage === 0).map((s) => s.node);
      const detail = JSON.stringify({ initial, grown0, all: started.map((s) => `${JSON.parse(s.spec.stage!).stage}@${s.node}`), stats: head.scaler.stats });
      expect([...initial].sort(), detail).toEqual(["node-A", "node-A", "node-A", "node-B"]);
      expect(started.every((s) => s.node !== "node-C"), detail).toBe(true);
      // The key stage grew by several processes, and not all on one node: the dispersion spreads them over B and D.
      expect(grown0.length, detail).toBeGreaterThanOrEqual(2);
      expect(new Set(grown0).size, detail).toBeGreaterThanOrEqual(2);
    } finally {
      await head.close();
    }
  }, 120_000);
});
