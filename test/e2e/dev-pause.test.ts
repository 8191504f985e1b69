/**
 * Issue 49 item 3: stall detection that knows its own pauses, in `tidegate dev` (router, regions and their
 * engine-health checks in one process). Its regions are static over two engine-sim processes (engines.kind
 * "openai-http": us-east's and us-west's), so that an engine can really stop while dev itself is the one paused.
 *
 * - Planted pauses of dev's whole event loop (SIGSTOP of the dev process: 500 ms, then 2 s) while 16 streams run:
 *   when it resumes, Node runs its due timers — the router's watchdog sweep, the engine-health check — before it reads
 *   the tokens and telemetry that arrived meanwhile. Measured against the process's own pauses (core/loop-pauses.ts),
 *   that silence blames nobody: no stream ends, no engine leaves service, no watchdog rule fires.
 * - A real stall is still caught: SIGSTOP of us-east's engine-sim ends its streams (in-stream `upstream_error`, "stopped
 *   answering") within 3 s, and the log says so in one summary line for the burst, not one per stream.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnTidegate, startDev, stopAll, type DevProc, type Proc } from "./procs.js";
import { streamLoad, waitFor } from "./stream-probe.js";

const MODEL = "llama3.2-3b";
let dir: string;
let dev: DevProc;
let engines: Proc[];

async function metricSum(prefix: string): Promise<number> {
  const text = await (await fetch(`${dev.url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(prefix)).reduce((a, l) => a + Number(l.split(" ").pop()), 0);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-dev-pause-"));
  const args = ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--port", "0", "--time-scale", "1"];
  engines = await Promise.all([0, 1].map((i) => spawnTidegate(`engine-sim ${i}`, args, /(http:\/\/127\.0\.0\.1:\d+)/)));
  const names = ["us-east", "us-west"];
  dev = await startDev(
    {
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: names.map((name) => ({ name, proximity: names.filter((o) => o !== name), gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 }] })),
      router: { port: 0 },
      controller: { actuator: "static" },
      engines: { kind: "openai-http", urls: Object.fromEntries(names.map((n, i) => [`${n}/${MODEL}`, [engines[i]!.match[1]!]])) },
      queue: { dataDir: join(dir, "data") },
    },
    dir,
  );
}, 120_000);

afterAll(async () => {
  for (const e of engines ?? []) e.child.kill("SIGCONT");
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("tidegate dev and its own pauses", () => {
  it("pauses of dev itself (500 ms, 2 s) under 16 streams end no stream and eject no engine", async () => {
    const load = streamLoad(dev.url, MODEL, 16, 1500);
    await waitFor("16 streams flowing", () => load.flowing() === 16, 20_000);
    await new Promise((r) => setTimeout(r, 1000));
    const pid = dev.proc.child.pid!;
    for (const pauseMs of [500, 2000]) {
      process.kill(pid, "SIGSTOP");
      await new Promise((r) => setTimeout(r, pauseMs));
      process.kill(pid, "SIGCONT");
      await new Promise((r) => setTimeout(r, 1500)); // the sweeps and health checks after it, with tokens flowing
    }
    load.maxTokens = 20;
    await load.stop();
    const failed = load.results.filter((r) => r.status !== 200 || !r.done);
    expect(failed.map((r) => `${r.status} ${r.inStreamError ?? ""} ${r.inStreamMessage ?? ""}`)).toEqual([]);
    expect(load.results.length).toBeGreaterThanOrEqual(16);
    expect(await metricSum("tidegate_router_watchdog_fired_total")).toBe(0);
    const log = dev.log();
    expect(log).not.toMatch(/engine down|stalled|gave up upstream waits/);
    console.log(`[dev-pause] ${load.results.length} streams through pauses of 500 ms and 2 s, none cut`);
  }, 90_000);

  it("a real stall is still caught: SIGSTOP of us-east's engine ends its streams within 3 s, with one summary line for the burst", async () => {
    const load = streamLoad(dev.url, MODEL, 16, 3000);
    await waitFor("16 streams flowing", () => load.flowing() === 16, 20_000);
    await new Promise((r) => setTimeout(r, 500));
    load.maxTokens = 20;
    const stopAtMs = Date.now();
    engines[0]!.child.kill("SIGSTOP");
    try {
      await waitFor("every stream open at the stop to end", () => !load.openSince(stopAtMs), 20_000);
      await load.stop();
    } finally {
      engines[0]!.child.kill("SIGCONT");
    }
    const cut = load.results.filter((r) => r.inStreamError !== undefined);
    expect(cut.length).toBeGreaterThan(0);
    for (const r of cut) {
      expect(r.region).toBe("us-east");
      expect(r.inStreamError).toBe("upstream_error");
      expect(r.inStreamMessage).toMatch(/^instance us-east\/\S+ stopped answering \(stalled: no byte for \d+ ms while \d+ request\(s\) or scrape\(s\) in flight\)$/);
      expect(r.endedAtMs - stopAtMs).toBeLessThan(3000);
    }
    // Everything else finished (those sent to us-east without a first token moved to us-west).
    for (const r of load.results.filter((x) => x.inStreamError === undefined)) expect(r.done).toBe(true);
    // One summary line for the burst, counting every cut stream (BurstLog: after 1 s without another).
    const summaries = await waitFor("the burst's summary line", () => dev.log().includes("streams failed after their first token"), 5000).then(() =>
      dev
        .log()
        .split("\n")
        .filter((l) => l.includes("streams failed after their first token"))
        .map((l) => JSON.parse(l) as { count: number }),
    );
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.count).toBe(cut.length);
    console.log(`[dev-pause] a cut stream's in-stream message: ${cut[0]!.inStreamMessage}`);
    console.log(`[dev-pause] engine stopped: ${cut.length} streams cut, the last ${Math.max(...cut.map((r) => r.endedAtMs - stopAtMs))} ms after the stop; one summary line`);
  }, 90_000);
});
