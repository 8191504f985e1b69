/**
 * bench:batch — does batch fill what is idle (issue 15, item 9)? Two `tidegate engine-sim` processes (llama3.2-3b,
 * KV capped so that KV, not max_num_seqs, bounds what an engine holds), each behind its own `tidegate region`
 * (openai-http), and `tidegate global`; the same N requests (default 10,000; BENCH_BATCH_N) go, in one run:
 *
 *   A. straight to the engines, at the concurrency each can hold (its KV capacity over one request's prompt + max
 *      tokens, at most max_num_seqs), half to each engine;
 *   B. as one batch through the router's Batch API on the idle fleet (upload, create, poll to `completed`).
 *
 * Figure 1: fillRatio = completion tokens/s of B over A (target ≥ 0.9 since issue 37; 0.8 before), the median over rounds that alternate the
 * two arms (A B, B A, A B; BENCH_BATCH_FILL_ROUNDS, default 3), each arm N requests a round: until issue 36 A ran
 * once, cold and first, and B once after it. B's clock runs from the batch's creation to its completion, so
 * validation, dispatch, result writing and finalization are all in it; a round whose batch did not complete every
 * request has no ratio (verdicts/batch.ts), and the figure then fails.
 * Figure 2: interactive TTFT with the batch beside it (target ≤ 1.05): a closed loop of 2 interactive streams
 * through the router, in rounds that alternate A B A B (../shared/BENCH.md): a fixed window without a batch, then the
 * same loop while a batch of N/2/rounds runs beside it — from the moment its first request is dispatched (the
 * router's tidegate_queue_dispatched_total moves; until issue 36 the window opened at upload, before any batch
 * request ran) to the batch's end. ttftRatio is the median over rounds of mean TTFT beside over mean TTFT alone
 * (BENCH_BATCH_TTFT_ROUNDS, default 3); an empty arm is no data and fails it. Until stop 26 the bench measured one
 * window alone and then one batch of N/2 beside it; that let drift between the two (the alone mean moved
 * 14.4–15.5 ms over three runs of one session) decide the ratio.
 * Each run also prints, not judged, the floor the engine model puts under figure 2 (`ttftFloorRatio`): an arrival
 * beside even one running batch request waits on average half the decode step under way (steps are not interrupted),
 * so the ratio is about (alone mean + half a step) / alone mean at best while any batch request runs beside it.
 * Both engine-sims schedule by priority and preempt batch work for interactive requests (issue 37; engine-sim's
 * default `--preemption recompute`): each run prints the preemptions its engines counted (vllm:num_preemptions_total),
 * per TTFT round and in all, beside its fill.
 * `--runs N` (default 1) repeats the whole run N times in a row, each with its own processes, as N invocations would;
 * the JSON line then holds each run's fill ratio, TTFT ratio and preemptions, and `met` only when every run met both
 * targets (verdicts/batch.ts runsChecks; the issue asks for five in a row). With N = 1 the figures are the one run's.
 * Every load is bounded in count and time (loopback only). The last line is one JSON object with the targets; exits
 * 0 either way. BENCH_BATCH_N, BENCH_BATCH_KV_TOKENS, BENCH_BATCH_TIME_SCALE, BENCH_BATCH_FILL_ROUNDS,
 * BENCH_BATCH_TTFT_ROUNDS and BENCH_BATCH_QUEUE (JSON merged into the config's `queue`, e.g. '{"fillIdle":false}'
 * for §6.3's rule) change the inputs: such a run is partial (met false, `shrunk` names them).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest, Agent } from "node:http";
import { cpus, loadavg, totalmem, tmpdir } from "node:os";
import { join } from "node:path";
import { getProfile } from "../../core/perf/model.js";
import { freePort, spawnTidegate, stopAll } from "../e2e/procs.js";
import { quantile } from "./sse-load.js";
import { envOverrides, jsonFigure, verdictOf } from "./verdicts/common.js";
import { BATCH_TARGET as TARGET, batchChecks, fillRatioOf, meanOrNaN as mean, runsChecks, ttftRatioOf, type FillRound, type TtftRound } from "./verdicts/batch.js";

const MODEL = "llama3.2-3b";
const N = Number(process.env.BENCH_BATCH_N ?? 10_000);
const KV_TOKENS = Number(process.env.BENCH_BATCH_KV_TOKENS ?? 24_000);
const TIME_SCALE = Number(process.env.BENCH_BATCH_TIME_SCALE ?? 1);
const MAX_TOKENS = 48;
const PROMPT = "Summarize the following text in a few words. ".repeat(12);
const INTERACTIVE_WORKERS = 2;
const INTERACTIVE_WINDOW_MS = 10_000;
const TTFT_ROUNDS = Number(process.env.BENCH_BATCH_TTFT_ROUNDS ?? 3);
const FILL_ROUNDS = Number(process.env.BENCH_BATCH_FILL_ROUNDS ?? 3);
const SHRUNK = envOverrides(["BENCH_BATCH_N", "BENCH_BATCH_KV_TOKENS", "BENCH_BATCH_TIME_SCALE", "BENCH_BATCH_FILL_ROUNDS", "BENCH_BATCH_TTFT_ROUNDS", "BENCH_BATCH_QUEUE"]);
const REGIONS = ["r-a", "r-b"] as const;
/** `--runs N`: whole runs in a row (default 1). */
const RUNS = runsFlag(process.argv.slice(2));

function runsFlag(args: string[]): number {
  const i = args.indexOf("--runs");
  if (i < 0) return 1;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1 || n > 20) throw new Error(`--runs must be an integer in 1..20, got ${args[i + 1]}`);
  return n;
}

interface Completion {
  completionTokens: number;
  promptTokens: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 1024 });

function postJson(url: string, body: unknown, timeoutMs = 120_000): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = httpRequest(url, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": data.length } }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString("utf8") }));
      res.on("error", reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(data);
  });
}

function requestBody(i: number) {
  return { model: MODEL, prompt: `${i}: ${PROMPT}`, max_tokens: MAX_TOKENS };
}

/**
 * Arm A: every request straight to an engine, `concurrency` workers per engine, each worker sending only to its own
 * engine (the requests come from one shared list). Until stop 27 a worker sent request i to engine (i + e) mod 2:
 * as requests of one size finish in cohorts, the parities lined up and whole cohorts went to one engine — sampled,
 * one engine held 129 running and 131 waiting while the other stood idle for most of the arm — so the baseline
 * measured little more than one engine, and the fill ratios of earlier runs are too high by as much.
 */
async function direct(engineUrls: string[], n: number, offset: number, concurrency: number): Promise<{ tokensPerS: number; seconds: number; tokens: number; requests: number; failed: number }> {
  let next = offset;
  let tokens = 0;
  let failed = 0;
  const t0 = performance.now();
  await Promise.all(
    engineUrls.flatMap((url) =>
      Array.from({ length: concurrency }, async () => {
        for (;;) {
          const i = next++;
          if (i >= offset + n) return;
          // A failed request is counted, not skipped over: the round then has no ratio, and the check names the arm.
          const r = await postJson(`${url}/v1/completions`, requestBody(i)).catch((err: unknown) => ({ status: 0, text: String(err) }));
          if (r.status !== 200) {
            if (failed++ === 0) console.log(`direct: engine ${url} answered ${r.status}: ${r.text.slice(0, 200)}`);
            continue;
          }
          tokens += (JSON.parse(r.text) as { usage: { completion_tokens: number } }).usage.completion_tokens;
        }
      }),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { tokensPerS: tokens / seconds, seconds, tokens, requests: n, failed };
}

/** Batch requests the router has dispatched to regions so far (its tidegate_queue_dispatched_total, every label). */
async function dispatchedTotal(routerUrl: string): Promise<number> {
  const text = await (await fetch(`${routerUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith("tidegate_queue_dispatched_total{")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

/**
 * Arm B: the same requests as one batch through the router; resolves when it is completed (bounded). `onDispatch`
 * (optional) is called once, as soon as the router has dispatched the batch's first request (polled every 10 ms
 * from the batch's creation; nothing else is dispatched meanwhile in this bench).
 */
async function viaBatch(routerUrl: string, n: number, offset: number, timeoutMs: number, onDispatch?: () => void): Promise<{ tokensPerS: number; seconds: number; tokens: number; status: string; complete: boolean }> {
  const lines = Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `r${offset + i}`, method: "POST", url: "/v1/completions", body: requestBody(offset + i) })).join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([lines]), "batch.jsonl");
  const file = (await (await fetch(`${routerUrl}/v1/files`, { method: "POST", body: form })).json()) as { id: string };
  const before = onDispatch === undefined ? 0 : await dispatchedTotal(routerUrl);
  const t0 = performance.now();
  const created = (await (await fetch(`${routerUrl}/v1/batches`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }) })).json()) as { id: string };
  const deadline = Date.now() + timeoutMs;
  let finished = false;
  const watching =
    onDispatch === undefined
      ? Promise.resolve()
      : (async () => {
          while (!finished && Date.now() < deadline) {
            if ((await dispatchedTotal(routerUrl)) > before) return onDispatch();
            await new Promise((r) => setTimeout(r, 10));
          }
        })();
  let b: { status: string; output_file_id: string | null; request_counts: { completed: number; failed: number } };
  for (;;) {
    b = (await (await fetch(`${routerUrl}/v1/batches/${created.id}`)).json()) as typeof b;
    if (["completed", "failed", "expired", "cancelled"].includes(b.status) || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  finished = true;
  await watching;
  const seconds = (performance.now() - t0) / 1000;
  let tokens = 0;
  if (b.output_file_id !== null) {
    const text = await (await fetch(`${routerUrl}/v1/files/${b.output_file_id}/content`)).text();
    for (const line of text.split("\n")) {
      if (line.length === 0) continue;
      tokens += (JSON.parse(line) as { response: { body: { usage: { completion_tokens: number } } } }).response.body.usage.completion_tokens;
    }
  }
  const complete = b.status === "completed" && b.request_counts.failed === 0 && b.request_counts.completed === n;
  return { tokensPerS: tokens / seconds, seconds, tokens, status: `${b.status} (${b.request_counts.completed} completed, ${b.request_counts.failed} failed)`, complete };
}

/**
 * Interactive closed loop through the router: mean and p50 time to the first streamed byte. It starts when `from`
 * resolves (at once without it) and runs for `windowMs` or until `until` settles, whichever is first.
 */
async function interactive(routerUrl: string, windowMs: number, until?: Promise<unknown>, from?: Promise<unknown>): Promise<{ ttftMs: number[]; failed: number }> {
  const ttftMs: number[] = [];
  let failed = 0;
  let over = false;
  void until?.finally(() => (over = true));
  if (from !== undefined) await Promise.race(until === undefined ? [from] : [from, until]);
  const end = Date.now() + windowMs;
  /** One stream: its TTFT, or why it failed (a refused stream is a failed request, not a fast one). */
  const stream = async (region: string): Promise<number | string> => {
    const t0 = performance.now();
    const res = await fetch(`${routerUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-tidegate-region": region },
      body: JSON.stringify({ model: MODEL, prompt: PROMPT, max_tokens: 16, stream: true }),
      signal: AbortSignal.timeout(30_000),
    });
    if (res.status !== 200) return `answered ${res.status}: ${(await res.text()).slice(0, 200)}`;
    const reader = res.body!.getReader();
    let ttft = Number.NaN;
    for (;;) {
      const { done } = await reader.read();
      if (Number.isNaN(ttft)) ttft = performance.now() - t0;
      if (done) return ttft;
    }
  };
  await Promise.all(
    Array.from({ length: INTERACTIVE_WORKERS }, async (_, w) => {
      let k = 0;
      while (Date.now() < end && !over) {
        const r = await stream(REGIONS[(w + k++) % REGIONS.length]!).catch((err: unknown) => String(err));
        if (typeof r === "number") ttftMs.push(r);
        else if (failed++ === 0) console.log(`interactive stream failed: ${r}`);
        await new Promise((res) => setTimeout(res, 50));
      }
    }),
  );
  return { ttftMs, failed };
}

/** Preemptions the engines have counted so far (vllm:num_preemptions_total, summed over both; 0 where absent). */
async function preemptionsTotal(engineUrls: readonly string[]): Promise<number> {
  let sum = 0;
  for (const url of engineUrls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const line of text.split("\n")) if (line.startsWith("vllm:num_preemptions_total{")) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
/** The TTFT line of one interactive arm: mean, p50, p90, p99 and max. */
const ttftLine = (xs: number[]) => `TTFT mean ${mean(xs).toFixed(1)} ms, p50 ${median(xs).toFixed(1)} ms, p90 ${quantile(xs, 0.9).toFixed(1)} ms, p99 ${quantile(xs, 0.99).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`;

/** One run's figures for the JSON line. */
interface RunResult {
  fill: FillRound[];
  ttft: TtftRound[];
  fillRatio: number;
  ttftRatio: number;
  preemptions: number;
  preemptionsRounds: number[];
  /** Not judged: the alone mean plus half a decode step beside one batch request, over the alone mean (see oneRun). */
  floorRatio: number;
}

/** One whole run: its own processes, the fill rounds, the TTFT rounds. */
async function oneRun(run: number): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), "tidegate-bench-batch-"));
  try {
    console.log(`run ${run + 1} of ${RUNS}: machine: nproc=${cpus().length} memory=${(totalmem() / 2 ** 30).toFixed(1)} GiB load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}; node ${process.version}`);
    const engines = await Promise.all(
      REGIONS.map((r) => spawnTidegate(`engine-sim ${r}`, ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--port", "0", "--time-scale", String(TIME_SCALE), "--kv-capacity-tokens", String(KV_TOKENS)], /(http:\/\/127\.0\.0\.1:\d+)/)),
    );
    const engineUrls = engines.map((e) => e.match[1]!);
    const ports = await Promise.all(REGIONS.map(() => freePort()));
    const configFile = join(dir, "bench.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
        regions: REGIONS.map((name, i) => ({ name, proximity: REGIONS.filter((o) => o !== name), grpcAddress: `127.0.0.1:${ports[i]}`, gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] })),
        router: { port: 0 },
        queue: { backend: "embedded", dataDir: join(dir, "data"), leaseMs: 600_000, ...(process.env.BENCH_BATCH_QUEUE === undefined ? {} : (JSON.parse(process.env.BENCH_BATCH_QUEUE) as object)) },
        controller: { actuator: "static" },
        engines: { kind: "openai-http", kvCapacityTokens: KV_TOKENS, urls: Object.fromEntries(REGIONS.map((r, i) => [`${r}/${MODEL}`, [engineUrls[i]!]])) },
      }),
    );
    await Promise.all(REGIONS.map((r) => spawnTidegate(`region ${r}`, ["region", "--config", configFile, "--region", r, "--log-level", "warn"], /grpc \S+ metrics/)));
    const global = await spawnTidegate("global", ["global", "--config", configFile, "--port", "0", "--log-level", "warn"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
    const routerUrl = global.match[1]!;
    for (const r of REGIONS) {
      const deadline = Date.now() + 20_000;
      while (!((await (await fetch(`${routerUrl}/healthz`)).json()) as { regions: Record<string, { available: boolean }> }).regions[r]?.available) {
        if (Date.now() > deadline) throw new Error(`region ${r} not available`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    // What one engine holds: KV over one request's prompt + max tokens (prompt tokens from the engine's own count).
    const probe = JSON.parse((await postJson(`${engineUrls[0]}/v1/completions`, requestBody(0))).text) as { usage: { prompt_tokens: number } };
    const perRequestTokens = probe.usage.prompt_tokens + MAX_TOKENS;
    const concurrency = Math.max(1, Math.min(256, Math.floor(KV_TOKENS / perRequestTokens)));
    console.log(`inputs: ${N} requests of ${probe.usage.prompt_tokens} prompt + ${MAX_TOKENS} output tokens; 2 engine-sim (KV ${KV_TOKENS} tokens each, time scale ${TIME_SCALE}, preemption recompute); direct concurrency ${concurrency} per engine; batch on the defaults (queue.fillTo 0.55, fillToPreemptible 0.9, maxPerReport 64, reports every 500 ms)`);
    const preemptedAtStart = await preemptionsTotal(engineUrls);

    // Fill rounds A B, B A, A B: each arm N requests of its own (distinct prompts), the order alternating so that
    // neither arm always runs first (cold) or on the engines the other has just left busy.
    const fill: FillRound[] = [];
    for (let round = 0; round < FILL_ROUNDS; round++) {
      const base = 2 * round * N;
      let a: Awaited<ReturnType<typeof direct>> | undefined;
      let b: Awaited<ReturnType<typeof viaBatch>> | undefined;
      for (const arm of round % 2 === 0 ? ["A", "B"] : ["B", "A"]) {
        if (arm === "A") {
          a = await direct(engineUrls, N, base, concurrency);
          console.log(`fill round ${round + 1} A direct: ${a.tokens} tokens in ${a.seconds.toFixed(1)} s = ${a.tokensPerS.toFixed(0)} tokens/s, ${a.failed} of ${a.requests} requests failed`);
        } else {
          b = await viaBatch(routerUrl, N, base + N, 600_000);
          console.log(`fill round ${round + 1} B batch : ${b.tokens} tokens in ${b.seconds.toFixed(1)} s = ${b.tokensPerS.toFixed(0)} tokens/s, ${b.status}`);
        }
      }
      fill.push({ directTokensPerS: a!.tokensPerS, batchTokensPerS: b!.tokensPerS, batchComplete: b!.complete, directRequests: a!.requests, directFailed: a!.failed });
      console.log(`fill round ${round + 1}: ratio (B/A tokens/s) ${jsonFigure(fillRatioOf(fill.at(-1)!))}`);
    }

    // Rounds A B: the loop alone for a fixed window, then the same loop while a batch of N/2/rounds runs, from its
    // first dispatched request for as long as it runs (at most 120 s). The ratio is the median of the rounds' ratios.
    const ttft: TtftRound[] = [];
    const preemptionsRounds: number[] = [];
    const perRound = Math.max(1, Math.floor(N / 2 / TTFT_ROUNDS));
    for (let round = 0; round < TTFT_ROUNDS; round++) {
      const alone = await interactive(routerUrl, INTERACTIVE_WINDOW_MS);
      const a1 = alone.ttftMs;
      const preemptedBefore = await preemptionsTotal(engineUrls);
      let dispatched!: () => void;
      const firstDispatch = new Promise<void>((r) => (dispatched = r));
      const batchBeside = viaBatch(routerUrl, perRound, 2 * FILL_ROUNDS * N + round * perRound, 600_000, () => dispatched());
      const besideRun = await interactive(routerUrl, 120_000, batchBeside, firstDispatch);
      const b1 = besideRun.ttftMs;
      const c = await batchBeside;
      preemptionsRounds.push((await preemptionsTotal(engineUrls)) - preemptedBefore);
      ttft.push({ aloneMs: a1, besideMs: b1, batchComplete: c.complete, aloneFailed: alone.failed, besideFailed: besideRun.failed });
      console.log(`round ${round + 1}: alone ${a1.length} streams (${alone.failed} failed), ${ttftLine(a1)}`);
      console.log(`round ${round + 1}: beside ${b1.length} streams (${besideRun.failed} failed), ${ttftLine(b1)}; the batch beside (${perRound}): ${c.status} in ${c.seconds.toFixed(1)} s; preemptions ${preemptionsRounds.at(-1)}; ratio ${jsonFigure(ttftRatioOf(ttft.at(-1)!))}`);
    }
    const preemptions = (await preemptionsTotal(engineUrls)) - preemptedAtStart;
    const { fillRatio, ttftRatio } = batchChecks(fill, ttft);
    const alone = ttft.flatMap((r) => r.aloneMs);
    const beside = ttft.flatMap((r) => r.besideMs);
    console.log(`fill ratio per round ${fill.map((r) => jsonFigure(fillRatioOf(r))).join(", ")}, median ${jsonFigure(fillRatio)}`);
    console.log(`interactive alone : ${alone.length} streams, ${ttftLine(alone)}`);
    // Not judged: what no scheduler on the same engine gets under. A decode step is not interrupted (vLLM's neither),
    // so an arrival beside even ONE running batch request waits on average half the step under way before its prefill
    // starts; the profile gives that step, and the ratio is the alone mean plus half of it over the alone mean.
    const halfStepMs = getProfile(MODEL, "h100-80gb", 2).decodeIterMs(1, perRequestTokens) / 2 * TIME_SCALE; // --time-scale multiplies simulated durations
    const floorRatio = (mean(alone) + halfStepMs) / mean(alone);
    console.log(`floor (not judged): half a decode step beside one batch request = ${halfStepMs.toFixed(2)} ms (profile, ${MODEL} on 2 × h100-80gb): TTFT ratio about ${jsonFigure(floorRatio)} at best (arrivals at random phase to the steps) while any batch request runs on the engine an interactive request lands on`);
    console.log(`interactive beside: ${beside.length} streams, ${ttftLine(beside)}; ratio per round ${ttft.map((r) => jsonFigure(ttftRatioOf(r))).join(", ")}, median ${jsonFigure(ttftRatio)}`);
    console.log(`run ${run + 1}: fill ratio ${jsonFigure(fillRatio)}, TTFT ratio ${jsonFigure(ttftRatio)}, preemptions ${preemptions} (per TTFT round ${preemptionsRounds.join(", ")})`);
    return { fill, ttft, fillRatio, ttftRatio, preemptions, preemptionsRounds, floorRatio };
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const runs: RunResult[] = [];
  try {
    for (let run = 0; run < RUNS; run++) runs.push(await oneRun(run));
  } finally {
    agent.destroy();
  }
  // One run: its own checks (medians of its rounds). Several: the same figures per run, every run held to both.
  const last = runs.at(-1)!;
  const { checks } = RUNS === 1 ? batchChecks(last.fill, last.ttft) : runsChecks(runs);
  const verdict = verdictOf(checks, SHRUNK);
  if (verdict.partial === true) console.log(`partial run (met false): ${SHRUNK.join(", ")}`);
  const alone = last.ttft.flatMap((r) => r.aloneMs);
  const beside = last.ttft.flatMap((r) => r.besideMs);
  const result = {
    bench: "batch",
    requests: N,
    runs: RUNS,
    directTokensPerS: last.fill.map((r) => Math.round(r.directTokensPerS)),
    batchTokensPerS: last.fill.map((r) => Math.round(r.batchTokensPerS)),
    fillRatio: jsonFigure(RUNS === 1 ? last.fillRatio : runsChecks(runs).worstFillRatio),
    fillRatioRounds: last.fill.map((r) => jsonFigure(fillRatioOf(r))),
    ttftAloneMs: jsonFigure(mean(alone), 1),
    ttftBesideMs: jsonFigure(mean(beside), 1),
    ttftRatio: jsonFigure(RUNS === 1 ? last.ttftRatio : runsChecks(runs).worstTtftRatio),
    ttftRatioRounds: last.ttft.map((r) => jsonFigure(ttftRatioOf(r))),
    ttftFloorRatio: jsonFigure(last.floorRatio),
    preemptions: last.preemptions,
    preemptionsRounds: last.preemptionsRounds,
    fillRatioRuns: runs.map((r) => jsonFigure(r.fillRatio)),
    ttftRatioRuns: runs.map((r) => jsonFigure(r.ttftRatio)),
    preemptionsRuns: runs.map((r) => r.preemptions),
    target: TARGET,
    met: verdict.met,
    ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}),
    ...(verdict.missed.length > 0 ? { missed: verdict.missed } : {}),
  };
  console.log(JSON.stringify(result));
}

main().catch(async (err: unknown) => {
  await stopAll();
  console.log(JSON.stringify({ bench: "batch", error: err instanceof Error ? err.message.split("\n")[0] : String(err), target: TARGET, met: false }));
  process.exit(0);
});
