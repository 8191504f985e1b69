// What the region's listing and /proc say of a pipelined instance served by stage processes (keystage.stageProcesses),
// shared by the tests that run one (test/e2e/dev-stage-processes.test.ts, test/region/stage-processes.test.ts).
import { existsSync, readFileSync } from "node:fs";
import type OpenAI from "openai";
import { expect } from "vitest";
import type { RegionInstances } from "../../core/ports.js";
import { DEFAULT_CLUSTER } from "../../region/keystage/keystage-config.js";
import { Pipeline } from "../../region/keystage/stages.js";
import { streamBurst } from "./streams.js";

export interface StageProc {
  stage: number;
  node: string;
  pid: number;
  state: string;
}

/** The serving instance's detail (of `model`, when given), its replicas per stage and its stage processes, from the listing. */
export function parseStages(l: RegionInstances, model?: string): { detail: string; stages: number[] | undefined; procs: StageProc[] } {
  const detail = l.instances.find((i) => i.state === "serving" && (model === undefined || i.model === model))?.detail ?? "";
  const stages = /replicas per stage \[([\d,]+)\]/.exec(detail)?.[1]!.split(",").map(Number);
  const list = /stage processes \[([^\]]*)\]/.exec(detail)?.[1] ?? "";
  const procs = [...list.matchAll(/(\d+)@(\S+) pid (\d+)( (\w+))?/g)].map((m) => ({ stage: Number(m[1]), node: m[2]!, pid: Number(m[3]), state: m[5] ?? "serving" }));
  return { detail, stages, procs };
}

/** The command line of a live process ("" once it is gone). */
export const cmdline = (pid: number): string => (existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ") : "");

/**
 * The burst both stage-process tests send (16 concurrent OpenAI streams, 6 requests each, 32 tokens, ≈ 130-token
 * prompts: every hop carries hidden × 2 × tokens bytes of activations), watching the listing every 200 ms meanwhile:
 * the texts, the most replicas each stage had, every stage-process pid seen. `onListing` sees each listing read.
 */
export async function burstWatching(client: OpenAI, model: string, listing: () => Promise<RegionInstances | undefined>, onListing?: (l: RegionInstances, s: ReturnType<typeof parseStages>) => void): Promise<{ texts: string[]; most: number[]; pids: Set<number> }> {
  const prompt = "the tide comes in and the gate holds ".repeat(15);
  const most = [1, 1, 1, 1];
  const pids = new Set<number>();
  let stop = false;
  const watch = (async () => {
    while (!stop) {
      const l = await listing();
      if (l !== undefined) {
        const s = parseStages(l, model);
        s.stages?.forEach((n, i) => (most[i] = Math.max(most[i]!, n)));
        for (const p of s.procs) if (p.pid > 0) pids.add(p.pid);
        onListing?.(l, s);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  try {
    return { texts: await streamBurst(client, model, prompt, 16, 6, 32), most, pids };
  } finally {
    stop = true;
    await watch;
  }
}

/** Every scaled stage-0 process (llama2-70b [32,16,16,16], tp 4) started from the stage cache: fork + its stage's bytes over PCIe (cache.ts startMs). */
export function expectStage0FromCache(started: { engine: string; loadMs: number }[]): void {
  const stage0 = started.filter((s) => /\/0\/\d+$/.test(s.engine));
  expect(stage0.length, JSON.stringify(started)).toBeGreaterThan(1);
  const stage0Bytes = new Pipeline({ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [32, 16, 16, 16], profileTp: 4, hiddenSize: 8192 }).stageBytes[0]!;
  for (const s of stage0) expect(s.loadMs).toBe(Math.round(DEFAULT_CLUSTER.forkMs + (stage0Bytes / DEFAULT_CLUSTER.pcieBytesPerS) * 1000));
}
