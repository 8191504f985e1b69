/**
 * Issue 11: a recorded sequence of interactive arrivals, planner targets and batch submissions, run
 * - live: `tidegate dev`'s wiring (bin/dev-stack.ts buildDevStack with controller.actuator "sim": the global router
 *   listening on a loopback port, one region runtime per region behind its in-process link, the Batch API mounted at
 *   /v1 with its Dispatcher on the links) on a wall clock run `SPEED`× faster (core/clock.ts ScaledClock): batches
 *   posted over HTTP (`POST /v1/files`, `POST /v1/batches`, read back with `GET /v1/batches/{id}`), targets sent over
 *   the links as the planner sends them, the scaling actions read back from `GET /admin/regions/{region}/instances`,
 *   and each interactive arrival handed, at its instant, to the router's dispatch (`dispatchWithRetry` on the
 *   router's own selector, links and watchdog — what router/completions.ts does with a parsed request) and streamed
 *   token by token through the gateway to its end;
 * - replayed: the week replay's wiring and loop shape (sim/week/week-wiring.ts, the router's `RouterCore.submit`
 *   into `Gateway.submit` callbacks, `drainedAdvance` on a VirtualClock) —
 * gives the same region and instance for every interactive request, the same scaling actions at the same instants
 * and every batch completed.
 *
 * What keeps a wall-clock run comparable: every decision is taken in a clock callback (controller passes, telemetry,
 * engine phases, the Dispatcher, the arrivals themselves), which ScaledClock runs at its due instant however late
 * its Node timer fires. Interactive requests do not come over a socket here: an HTTP hop would start each one a few
 * wall ms (× SPEED) after its instant, and the simulated engines' continuous-time model would then run a slightly
 * different timeline — with a ×3 clock that was enough to move one scale-out by 2 s and a drain to another instance
 * (seen while building this test). Batches are posted at x.150, so their HTTP calls finish well before the next whole
 * second, when the Dispatcher acts on telemetry (the test checks they did); plans go out at x.750.
 */
import { SMALL_MODEL, SMALL_REGIONS, smallFleet } from "../helpers/small-fleet.js";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { ScaledClock } from "../helpers/scaled-clock.js";
import { silentLogger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest, RegionTargets } from "../../core/ports.js";
import { buildDevStack } from "../../bin/dev-stack.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { createBatchService } from "../../router/batch/service.js";
import { DirFileStore } from "../../router/queue/dir-files.js";
import { EmbeddedQueueStore } from "../../router/queue/embedded.js";
import { dispatchWithRetry } from "../../router/relay.js";
import { requestKvBytes } from "../../router/selector.js";
import { fleetConfig } from "../../sim/week/fleet.js";
import { drainMicrotasks, drainedAdvance } from "../../sim/week/replay.js";
import { wireWeek } from "../../sim/week/week-wiring.js";
import { seededRandom } from "../../sim/workload/rng.js";

const SPEED = 3;
const MODEL = SMALL_MODEL;
const REGIONS = SMALL_REGIONS;
const ADMIN = "tg-admin-live-vs-replay";
const SEED = 5;

const fleet = smallFleet();

interface Arrival { atMs: number; client: RegionName; prompt: number; output: number }

/** 80 s of requests on the 250 ms grid (offset 125 ms): one a second, then every slot from us-east clients for 45 s. */
function arrivals(): Arrival[] {
  const random = seededRandom(SEED, 1);
  const out: Arrival[] = [];
  for (let slot = 0; slot < 320; slot++) {
    const atMs = slot * 250 + 125;
    const burst = atMs >= 10_000 && atMs < 55_000;
    if (!burst && slot % 4 !== 0) continue;
    out.push({ atMs, client: burst || random() < 0.5 ? "us-east" : "us-west", prompt: 500 + Math.floor(random() * 2500), output: 100 + Math.floor(random() * 300) });
  }
  return out;
}

const targets = (decisionId: number, atMs: number, east: number, west: number): RegionTargets[] =>
  REGIONS.map((region) => ({ decisionId, region, madeAtMs: atMs, advisory: false, endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: region === "us-east" ? east : west, forecastTokensPerS: 4000 * (region === "us-east" ? east : west) }] }));
const PLANS = [
  { atMs: 750, t: targets(1, 750, 1, 1) },
  { atMs: 12_750, t: targets(2, 12_750, 4, 2) },
  { atMs: 70_750, t: targets(3, 70_750, 1, 1) },
];
/** Batch posts just after a whole second: the HTTP calls have until the next one, when the Dispatcher next acts. */
const BATCH_AT = [3_150, 30_150, 60_150];
const END_MS = 130_000;

function batchJsonl(b: number): string {
  const random = seededRandom(SEED + 100, b);
  return Array.from({ length: 20 }, (_, i) => JSON.stringify({ custom_id: `b${b}-${i}`, method: "POST", url: "/v1/completions", body: { model: MODEL, prompt: "a".repeat(4 * (100 + Math.floor(random() * 600))), max_tokens: 30 + Math.floor(random() * 100) } })).join("\n");
}

/** Posts one batch the way a client does (`request` is a fetch or a Hono app's request); resolves with its id. */
async function postBatch(request: (path: string, init: RequestInit) => Promise<Response>, jsonl: string): Promise<string> {
  const form = new FormData();
  form.set("purpose", "batch");
  form.set("file", new Blob([jsonl]), "batch.jsonl");
  const file = (await (await request("/files", { method: "POST", body: form })).json()) as { id: string };
  const res = await request("/batches", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }) });
  if (res.status !== 200) throw new Error(`POST /batches: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

async function batchOutcomes(request: (path: string, init: RequestInit) => Promise<Response>, ids: string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => {
    const b = (await (await request(`/batches/${id}`, {})).json()) as { status: string; request_counts: { total: number; completed: number; failed: number } };
    return `${b.status} ${b.request_counts.completed}/${b.request_counts.total} failed ${b.request_counts.failed}`;
  }));
}

interface Outcome { choices: string[]; actions: string[]; batches: string[] }

const actionLine = (region: string, a: { atMs: number; kind: string; instanceId: string; reason: string }) => `${a.atMs} ${region} ${a.kind} ${a.instanceId} ${a.reason}`;

async function replayed(strategy: string, seq: Arrival[]): Promise<Outcome> {
  const clock = new VirtualClock(0);
  const routed = { instanceId: "" };
  const w = wireWeek({ fleet, clock, strategy: resolveStrategy(strategy), seed: SEED, historyShiftMs: 0, onRouted: (_region, _req, id) => void (routed.instanceId = id) });
  const { advance, due } = drainedAdvance(clock);
  const choices: string[] = [];
  const batches: string[] = [];
  const request = (path: string, init: RequestInit) => Promise.resolve(w.batch.routes.request(path, init));
  type Ev = { atMs: number; i?: number; plan?: RegionTargets[]; batch?: number };
  const events: Ev[] = [...seq.map((a, i) => ({ atMs: a.atMs, i })), ...PLANS.map((p) => ({ atMs: p.atMs, plan: p.t })), ...BATCH_AT.map((atMs, batch) => ({ atMs, batch }))].sort((x, y) => x.atMs - y.atMs);
  for (const e of events) {
    if (due(e.atMs)) await advance(e.atMs);
    else clock.advanceToSync(e.atMs);
    if (e.plan !== undefined) {
      for (const t of e.plan) await w.regions[w.regionIndex.get(t.region)!]!.link.sendTargets(t);
    } else if (e.batch !== undefined) {
      batches.push(await postBatch(request, batchJsonl(e.batch)));
      await drainMicrotasks();
    } else {
      const a = seq[e.i!]!;
      const req: GenerateRequest = { id: `r${e.i}`, model: MODEL, kind: "completion", promptTokens: a.prompt, maxTokens: a.output, priority: 0, body: {} };
      const region = w.router.submit(req, a.client, {});
      choices[e.i!] = region === undefined ? "unserved" : `${region} ${routed.instanceId}`;
    }
  }
  await advance(END_MS);
  const out = { choices, actions: w.regions.flatMap((r) => r.actions.map((a) => actionLine(r.name, a))), batches: await batchOutcomes(request, batches) };
  await w.close();
  return out;
}

async function live(strategy: string, seq: Arrival[]): Promise<Outcome & { wallS: number; lateMs: number; postedLate: string[] }> {
  const base = fleetConfig(fleet);
  const config = { ...base, controller: { ...base.controller, actuator: "sim" as const, strategy: strategy as typeof base.controller.strategy }, router: { ...base.router, adminKeys: [ADMIN] } };
  const clock = new ScaledClock(SPEED, 0, { held: true });
  const routed = new Map<string, string>();
  const batch = createBatchService({ config, clock, stores: { store: new EmbeddedQueueStore(null), files: new DirFileStore(null) } });
  const stack = buildDevStack({
    config,
    clock,
    logger: silentLogger,
    mounts: [{ path: "/v1", app: batch.routes }],
    sim: { delays: fleet.delays, weights: fleet.weights, spot: fleet.spot, random: (ri) => seededRandom(SEED, 1000 + ri) },
    onRouted: (region, req, instanceId) => routed.set(req.id, `${region} ${instanceId}`),
  });
  batch.start(stack.links);
  await stack.router.listen("127.0.0.1", 0);
  const url = stack.router.url();
  const request = (path: string, init: RequestInit) => fetch(`${url}/v1${path}`, init);
  const choices: string[] = new Array(seq.length).fill("");
  const batches: Promise<string>[] = [];
  const streams: Promise<void>[] = [];
  let lateMs = 0;
  // Each arrival enters where the router's completion handler hands a parsed request on (router/completions.ts):
  // dispatchWithRetry on the router's own selector, links and stall watchdog, the stream read to its end.
  const send = async (i: number) => {
    const a = seq[i]!;
    const req: GenerateRequest = { id: `r${i}`, model: MODEL, kind: "completion", promptTokens: a.prompt, maxTokens: a.output, priority: 0, body: {} };
    const { selector, links, watchdog } = stack.router.deps;
    try {
      const opened = await dispatchWithRetry({ selector, links, req, clientRegion: a.client, kvBytes: requestKvBytes(MODEL, a.prompt, a.output), signal: new AbortController().signal, ...(watchdog === undefined ? {} : { watchdog }) });
      while ((await opened.next()).done !== true);
      opened.release();
      choices[i] = routed.get(req.id) ?? "no route";
    } catch (err) {
      choices[i] = `unserved: ${String(err)}`;
    }
  };
  seq.forEach((a, i) => clock.at(a.atMs, () => void streams.push(send(i))));
  for (const p of PLANS) clock.at(p.atMs, () => p.t.forEach((t) => void stack.links[REGIONS.indexOf(t.region as (typeof REGIONS)[number])]!.sendTargets(t)));
  const postedLate: string[] = [];
  BATCH_AT.forEach((atMs, b) =>
    clock.at(atMs, () =>
      void batches.push(
        postBatch(request, batchJsonl(b)).then((id) => {
          if (clock.now() >= Math.ceil(atMs / 1000) * 1000) postedLate.push(`batch ${b} posted at ${atMs} was created at ${clock.now().toFixed(0)}`);
          return id;
        }),
      ),
    ),
  );
  // How late the wall clock ran: the largest gap between an instant and when its timer fired.
  const probe = clock.every(250, () => undefined);
  const t0 = performance.now();
  clock.start();
  const tick = setInterval(() => (lateMs = Math.max(lateMs, (performance.now() - t0) * SPEED - clock.now())), 10);
  await new Promise<void>((resolve) => clock.at(END_MS, resolve));
  clearInterval(tick);
  probe.cancel();
  await Promise.all(streams);
  const ids = await Promise.all(batches);
  const actions: string[] = [];
  for (const region of REGIONS) {
    const listing = (await (await fetch(`${url}/admin/regions/${region}/instances`, { headers: { authorization: `Bearer ${ADMIN}` } })).json()) as { actions: { atMs: number; kind: string; instanceId: string; reason: string }[] };
    actions.push(...listing.actions.map((a) => actionLine(region, a)));
  }
  const out = { choices, actions, batches: await batchOutcomes(request, ids), wallS: (performance.now() - t0) / 1000, lateMs, postedLate };
  await batch.close();
  await stack.close();
  clock.close();
  return out;
}

describe("live (tidegate dev wiring, scaled wall clock, HTTP) and replayed", () => {
  // reactive acts on utilization alone; lt-i jumps to the recorded targets (lt-ua, the default, stays within its
  // target band on this sequence and takes no action at all, which would show nothing).
  for (const strategy of (process.env.LIVE_VS_REPLAY_STRATEGIES ?? "reactive,lt-i").split(",")) {
    it(`${strategy}: the same region and instance for every request, the same scaling actions, every batch done`, async () => {
      const seq = arrivals();
      const replay = await replayed(strategy, seq);
      const run = await live(strategy, seq);
      console.log(`live vs replay (${strategy}): ${seq.length} interactive requests, ${BATCH_AT.length} batches of 20, ${PLANS.length} plans; ${new Set(replay.choices).size} instances used, ${replay.choices.filter((c) => c.startsWith("us-west")).length} to us-west, ${replay.actions.length} scaling actions (${[...new Set(replay.actions.map((a) => a.split(" ")[2]))].join(", ")}); live ran ${run.wallS.toFixed(1)} s wall at ×${SPEED}, timers up to ${run.lateMs.toFixed(0)} virtual ms late`);
      const firstDiff = run.choices.findIndex((c, i) => c !== replay.choices[i]);
      if (firstDiff >= 0) console.log(`first difference: request ${firstDiff} at ${seq[firstDiff]!.atMs} ms: live ${run.choices[firstDiff]}, replay ${replay.choices[firstDiff]}`);
      if (run.actions.join() !== replay.actions.join()) console.log(`actions live:\n  ${run.actions.join("\n  ")}\nreplay:\n  ${replay.actions.join("\n  ")}`);
      // A batch whose HTTP calls took past the next whole second would be dispatched a tick later: a slow machine, not a divergence.
      expect(run.postedLate).toEqual([]);
      expect(run.choices).toEqual(replay.choices);
      expect(run.actions).toEqual(replay.actions);
      expect(replay.batches).toEqual(BATCH_AT.map(() => "completed 20/20 failed 0"));
      expect(run.batches).toEqual(replay.batches);
      // Not trivial: both regions served, the burst scaled out and the quiet end scaled back in.
      expect(new Set(replay.choices.map((c) => c.split(" ")[0]))).toEqual(new Set(REGIONS));
      expect(replay.actions.some((a) => / (provision|reclaim|redeploy) /.test(a))).toBe(true);
      expect(replay.actions.some((a) => / drain /.test(a))).toBe(true);
    }, 180_000);
  }
});
