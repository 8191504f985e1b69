/**
 * The replay runs the live region runtime (issue 11): one recorded sequence of interactive arrivals, planner
 * targets and batch submissions, fed to the week replay's wiring (week-wiring.ts: per region the region runtime on the
 * `sim` actuator, the in-process links, the router's selector and batch tier) in its two shapes —
 * - replay: the week loop's calls and clock (`drainedAdvance`: events fire synchronously, microtasks drained every
 *   virtual second): the router's `RouterCore.submit` into `Gateway.submit` callbacks (the links' callback shape),
 *   targets by `link.sendTargets`, batch requests sent by the Dispatcher through the same callback shape;
 * - live: what the router does (`dispatchWithRetry` over the links, `Gateway.generate`, `SimEngine.generate`
 *   streaming every token, the stream read to its end; the Dispatcher's `submit` reading each batch request's
 *   stream as over any live link), targets sent on clock timers, the clock advanced event by event with microtasks drained after each —
 * with the batches posted to the Batch API (`POST /files`, `POST /batches`) at the same instants in both, must give
 * the same region and instance for every interactive request, the same scaling actions at the same times, and every
 * batch completed.
 */
import { SMALL_MODEL, SMALL_REGIONS, smallFleet } from "../../test/helpers/small-fleet.js";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest, RegionLink, RegionTargets } from "../../core/ports.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { dispatchWithRetry } from "../../router/relay.js";
import { requestKvBytes } from "../../router/selector.js";
import { seededRandom } from "../workload/rng.js";
import { drainMicrotasks, drainedAdvance } from "./replay.js";
import { wireWeek, type WeekWiring } from "./week-wiring.js";

const MODEL = SMALL_MODEL;
const REGIONS = SMALL_REGIONS;

const fleet = smallFleet();

interface Arrival { atMs: number; client: RegionName; prompt: number; output: number }

/** 90 s of requests: light, a burst from us-east clients between 10 and 75 s (long enough for LT-UA's smoothed utilization), light again. */
function arrivals(): Arrival[] {
  const random = seededRandom(7, 1);
  const out: Arrival[] = [];
  let t = 0;
  while (t < 90_000) {
    const burst = t >= 10_000 && t < 75_000;
    t += (burst ? 14 : 150) * -Math.log(1 - random());
    out.push({ atMs: t, client: burst || random() < 0.5 ? "us-east" : "us-west", prompt: 100 + Math.floor(random() * 1200), output: 20 + Math.floor(random() * 180) });
  }
  return out;
}

const targets = (decisionId: number, atMs: number, east: number, west: number): RegionTargets[] =>
  REGIONS.map((region) => ({ decisionId, region, madeAtMs: atMs, advisory: false, endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: region === "us-east" ? east : west, forecastTokensPerS: 4000 * (region === "us-east" ? east : west) }] }));
// Plans land between controller passes (every 1 s): at the same instant as a pass, which runs first is a matter of
// timer order, not of the runtime (the week loop plans right after the hour's events).
const PLANS = [
  { atMs: 0, t: targets(1, 0, 1, 1) },
  { atMs: 5_500, t: targets(2, 5_500, 4, 2) },
  { atMs: 100_500, t: targets(3, 100_500, 1, 1) },
];
const END_MS = 240_000;

/** Three batches of 40 completions posted through the Batch API while the burst builds and after it. */
const BATCHES = [2_000.5, 30_000.5, 70_000.5].map((atMs, b) => {
  const random = seededRandom(11, b);
  const lines = Array.from({ length: 40 }, (_, i) => JSON.stringify({ custom_id: `b${b}-${i}`, method: "POST", url: "/v1/completions", body: { model: MODEL, prompt: "a".repeat(4 * (100 + Math.floor(random() * 700))), max_tokens: 30 + Math.floor(random() * 120) } }));
  return { atMs, jsonl: lines.join("\n") };
});

/** Posts one batch the way a client does; resolves with its id. */
async function postBatch(w: WeekWiring, jsonl: string): Promise<string> {
  const form = new FormData();
  form.set("purpose", "batch");
  form.set("file", new Blob([jsonl]), "batch.jsonl");
  const file = (await (await w.batch.routes.request("/files", { method: "POST", body: form })).json()) as { id: string };
  const res = await w.batch.routes.request("/batches", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

async function batchOutcome(w: WeekWiring, ids: string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => {
    const b = (await w.batch.store.getBatch(id))!;
    return `${b.status} ${b.completed}/${b.total} failed ${b.failed}`;
  }));
}

const request = (a: Arrival, i: number): GenerateRequest => ({ id: `r${i}`, model: MODEL, kind: "chat", promptTokens: a.prompt, maxTokens: a.output, priority: 0, body: {} });

function wire(strategy: string, params: Record<string, number>, batchShape: "callbacks" | "stream") {
  const clock = new VirtualClock(0);
  const routed = { instanceId: "" };
  const w = wireWeek({ fleet, clock, strategy: resolveStrategy(strategy, params), seed: 3, historyShiftMs: 0, batchShape, onRouted: (_region, _req, id) => void (routed.instanceId = id) });
  const actions = () => w.regions.flatMap((r) => r.actions.map((a) => `${a.atMs} ${r.name} ${a.kind} ${a.instanceId} ${a.reason}`));
  return { clock, w, actions, routed };
}

async function replayShape(strategy: string, params: Record<string, number>, seq: Arrival[]) {
  const { clock, w, actions, routed } = wire(strategy, params, "callbacks");
  const { advance, due } = drainedAdvance(clock);
  const choices: string[] = [];
  const batches: string[] = [];
  type Ev = { atMs: number; i?: number; plan?: RegionTargets[]; jsonl?: string };
  const events: Ev[] = [...seq.map((a, i) => ({ atMs: a.atMs, i })), ...PLANS.map((p) => ({ atMs: p.atMs, plan: p.t })), ...BATCHES.map((b) => ({ atMs: b.atMs, jsonl: b.jsonl }))].sort((x, y) => x.atMs - y.atMs);
  for (const e of events) {
    if (due(e.atMs)) await advance(e.atMs);
    else clock.advanceToSync(e.atMs);
    if (e.plan !== undefined) {
      for (const t of e.plan) await w.regions[w.regionIndex.get(t.region)!]!.link.sendTargets(t);
      continue;
    }
    if (e.jsonl !== undefined) {
      batches.push(await postBatch(w, e.jsonl));
      await drainMicrotasks();
      continue;
    }
    const a = seq[e.i!]!;
    const region = w.router.submit(request(a, e.i!), a.client, {});
    choices[e.i!] = region === undefined ? "unserved" : `${region} ${routed.instanceId}`;
  }
  await advance(END_MS);
  const out = { choices, actions: actions(), batches: await batchOutcome(w, batches) };
  await w.close();
  return out;
}

async function liveShape(strategy: string, params: Record<string, number>, seq: Arrival[]) {
  const { clock, w, actions } = wire(strategy, params, "stream");
  const batches: string[] = [];
  const posts = [...BATCHES];
  const links = new Map<RegionName, RegionLink>(w.regions.map((r) => [r.name, r.link]));
  const choices: string[] = [];
  const inflight = () => new Map(w.regions.flatMap((r) => r.sim.gateway.instances().map((i) => [`${r.name} ${i.instanceId}`, i.inFlight] as const)));
  let open = 0;
  for (const p of PLANS) clock.at(p.atMs, () => { for (const t of p.t) void w.regions[w.regionIndex.get(t.region)!]!.link.sendTargets(t); });
  seq.forEach((a, i) =>
    clock.at(a.atMs, () => {
      const before = inflight();
      open++;
      void (async () => {
        try {
          const opened = await dispatchWithRetry({ selector: w.selector, links, req: request(a, i), clientRegion: a.client, kvBytes: requestKvBytes(MODEL, a.prompt, a.output), signal: new AbortController().signal });
          while ((await opened.next()).done !== true);
          opened.release();
        } catch {
          choices[i] = "unserved";
        } finally {
          open--;
        }
      })();
      for (const [id, k] of inflight()) if (k > (before.get(id) ?? 0)) choices[i] = id;
    }),
  );
  for (let guard = 0; guard < 2_000_000; guard++) {
    const next = clock.nextEventMs();
    if (next === undefined || next > END_MS) break;
    // A client posts its batch at its instant; the clock waits for the HTTP calls, as in the replay shape.
    if (posts.length > 0 && posts[0]!.atMs <= next) {
      const b = posts.shift()!;
      await clock.advanceTo(b.atMs, 40);
      batches.push(await postBatch(w, b.jsonl));
      await drainMicrotasks();
      continue;
    }
    await clock.advanceTo(next, 40);
  }
  await clock.advanceTo(END_MS, 40);
  expect(open).toBe(0);
  const out = { choices, actions: actions(), batches: await batchOutcome(w, batches) };
  await w.close();
  return out;
}

describe("the week replay's region runtime, replayed and live", () => {
  // LT-UA steps out on the controller's 1-minute smoothed utilization: a lower out threshold lets it act within
  // this 90-second sequence.
  const runs: [string, Record<string, number>][] = [["reactive", {}], ["lt-i", {}], ["lt-ua", { outAbove: 0.4 }]];
  for (const [strategy, params] of runs) {
    it(`${strategy}: the same region and instance for every request and the same scaling actions`, async () => {
      const seq = arrivals();
      const replay = await replayShape(strategy, params, seq);
      const live = await liveShape(strategy, params, seq);
      console.log(`${strategy}: ${seq.length} interactive requests and ${BATCHES.length} batches of 40, ${replay.choices.filter((c) => c.startsWith("us-west")).length} to us-west, ${new Set(replay.choices).size} instances used, ${replay.actions.length} scaling actions (${[...new Set(replay.actions.map((a) => a.split(" ")[2]))].join(", ")})`);
      const firstDiff = live.choices.findIndex((c, i) => c !== replay.choices[i]);
      if (firstDiff >= 0) console.log(`first difference: request ${firstDiff} at ${seq[firstDiff]!.atMs.toFixed(1)} ms: live ${live.choices[firstDiff]}, replay ${replay.choices[firstDiff]}; actions live ${live.actions.join(" | ")}; replay ${replay.actions.join(" | ")}`);
      expect(live.choices).toEqual(replay.choices);
      expect(live.actions).toEqual(replay.actions);
      expect(replay.batches).toEqual(["completed 40/40 failed 0", "completed 40/40 failed 0", "completed 40/40 failed 0"]);
      expect(live.batches).toEqual(replay.batches);
      // Not trivial: both regions served, the burst made the region scale out and in, and nothing went unserved.
      expect(new Set(replay.choices.map((c) => c.split(" ")[0]))).toEqual(new Set(REGIONS));
      expect(replay.choices).not.toContain("unserved");
      expect(replay.actions.some((a) => / (provision|reclaim|redeploy)/.test(a))).toBe(true);
      expect(replay.actions.some((a) => / drain/.test(a))).toBe(true);
    }, 60_000);
  }
});
