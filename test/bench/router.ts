/**
 * bench:router — the cost of tidegate's two hops, against nginx's. The same streaming load (32 concurrent streams
 * of 50 tokens, `/v1/completions`, llama3.2-3b) goes, in one run, to each arm every round, the arms in an order
 * shuffled per round (seeded, ARM_ORDER_SEED; printed), so that no arm always runs first or right after another:
 *   A. straight to one `tidegate engine-sim` process;
 *   N. through nginx (Debian's package) as two plain proxy hops (two instances, one worker each) to the same engine;
 *   B. through `tidegate global` → the framed dispatch connection → `tidegate region` → HTTP (openai-http adapter) →
 *      the same engine;
 *   P. (a floor, not a target) through two bare Node TCP relays (node-pipe.ts: bytes copied both ways, nothing
 *      parsed) to the same engine: what any hop written in Node costs on this machine before it does any work.
 * Every figure is the median over rounds of the per-round comparison, judged unrounded (only what is printed is
 * rounded); a check on an arm that failed a stream fails and names it (verdicts/router.ts). Tokens are counted by
 * scanning the response bytes for `data: ` (sse-load.ts), never by parsing chunks. CPU per token comes from /proc (each thread's schedstat, ns) for each
 * relaying process: global and region, and nginx's two workers.
 *
 * Targets (verdicts/router.ts). Issue 15 item 10: tidegate's throughput ≥ 0.97× nginx's; tidegate's added median
 * TTFT at 32 streams ≤ 5× nginx's added median; ≤ 0.5 ms added median TTFT for one stream at a time; ≤ 10 µs CPU per
 * relayed token in each of the global and region processes. Issue 32 item 8: each tidegate hop's CPU per relayed
 * token ≤ 1.5× arm P's same hop in the same round (median of the per-round ratios), and ≤ 1 ms added median TTFT
 * for one stream through the two hops. Also printed: the throughput ratio against the engine alone, p99, and
 * (call-cost.ts) the CPU of one gRPC Dispatch call and of one HTTP/1.1 request in call setup alone, and arm P's
 * figures (`nodePipe`) beside tidegate's.
 * The last line printed is one JSON object (with `met` and, on failure, `error`); the process exits 0 either way.
 */
import { writeFileSync, mkdtempSync, rmSync, readFileSync, readdirSync } from "node:fs";
import { Agent } from "node:http";
import { cpus, loadavg, totalmem, tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";
import { grpcDispatchCallCost, http1RequestCost } from "./call-cost.js";
import { NON_TOKEN_EVENTS, quantile, runLoad, type LoadResult } from "./sse-load.js";
import { packageVersion as version } from "./common.js";
import { nginxBinary, startNginxHops, type NginxHops } from "./nginx.js";
import { startNodePipeHops } from "./node-pipe.js";
import { envOverrides, jsonFigure, ratio, verdictOf } from "./verdicts/common.js";
import { ARM_ORDER_SEED, ROUTER_TARGET, armOrder, routerChecks, routerFiguresOf, type RouterArm, type RouterFigures } from "./verdicts/router.js";

const MODEL = "llama3.2-3b";
const CONCURRENCY = 32;
const TOKENS = 50;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const REQUESTS_PER_WORKER = Number(process.env.BENCH_REQUESTS_PER_WORKER ?? 4);
/**
 * Requests per arm before anything is measured (same load shape, not reported). V8 optimizes a function after it has
 * run enough: after one round, tidegate's per-request path (body, validation, selection, dispatch) still ran in
 * V8's lower tiers, and a single stream's added TTFT measured its tiering (1.6 ms after 160 requests, 0.66 ms after
 * 4,000 in a timestamped trace), not the relay a long-running router gives. Every arm gets the same warm-up.
 */
const WARMUP_REQUESTS = Number(process.env.BENCH_WARMUP_REQUESTS ?? 2048);
/** Settings that change what a run measures: such a run is partial (met false). */
const SHRUNK = envOverrides(["BENCH_ROUNDS", "BENCH_REQUESTS_PER_WORKER", "BENCH_WARMUP_REQUESTS"]);
const TARGET = ROUTER_TARGET;
const ARM_LETTER: Record<RouterArm, string> = { direct: "A", nginx: "N", pipe: "P", tidegate: "B" };


async function waitAvailable(routerUrl: string, region: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const h = (await (await fetch(`${routerUrl}/healthz`)).json()) as { regions: Record<string, { available: boolean }> };
      if (h.regions[region]?.available) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`region ${region} not available at ${routerUrl} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** CPU seconds of a process so far split into user and system time, from /proc (Linux); NaN elsewhere. */
function cpuSplit(pid: number | undefined): { user: number; sys: number } {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return { user: Number(fields[11]) / 100, sys: Number(fields[12]) / 100 };
  } catch {
    return { user: Number.NaN, sys: Number.NaN };
  }
}

/**
 * CPU seconds a process has run so far, from /proc (Linux); NaN elsewhere. The sum over its threads of
 * `/proc/<pid>/task/<tid>/schedstat`'s time on a CPU (nanoseconds): a hop's few hundred milliseconds a round are
 * then measured to the microsecond, where `/proc/<pid>/stat`'s user + system time counts 10 ms ticks (a node pipe
 * hop's 60 ms a round was 6 ticks, ±1 of them). Where schedstat is missing, the ticks.
 */
function cpuSeconds(pid: number | undefined): number {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    if (Number.isFinite(ns)) return ns / 1e9;
  } catch {
    // no schedstat (or the process is gone): the ticks below
  }
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

function describeRound(label: string, r: LoadResult): string {
  return `${label}: ${r.results.length} streams, ${r.failures} failed, ${r.tokens} tokens in ${r.wallMs.toFixed(0)} ms = ${r.tokensPerS.toFixed(0)} tok/s, TTFT p50 ${r.ttftMedianMs.toFixed(2)} ms p99 ${r.ttftP99Ms.toFixed(2)} ms`;
}

/** Per-round figures of one arm against the direct arm A. */
interface Arm {
  ratioVsDirect: number[];
  addedP50: number[];
  addedP99: number[];
  single: number[];
  cpu: Record<string, number[]>;
}
const newArm = (procs: string[]): Arm => ({ ratioVsDirect: [], addedP50: [], addedP99: [], single: [], cpu: Object.fromEntries(procs.map((p) => [p, []])) });
/** The median of `xs` (the figures not judged; routerFiguresOf makes the judged ones). */
const med = (xs: number[]) => quantile(xs, 0.5);
/** A figure as printed: `digits` decimals (jsonFigure: NaN and ±Infinity as strings). */
const shown = (x: number, digits: number) => jsonFigure(x, digits);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "tidegate-bench-router-"));
  const procs: Proc[] = [];
  let nginx: NginxHops | undefined;
  try {
    console.log(`machine: nproc=${cpus().length} memory=${(totalmem() / 2 ** 30).toFixed(1)} GiB cpu=${cpus()[0]?.model ?? "?"} load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
    const bin = nginxBinary();
    if (bin === undefined) throw new Error("nginx not found (install Debian's nginx package, or set NGINX_BIN): the bench compares tidegate's two hops with nginx's");
    console.log(`inputs: model ${MODEL} on h100-80gb tp2, ${CONCURRENCY} concurrent streams × ${REQUESTS_PER_WORKER} requests each per round, ${TOKENS} tokens per stream, ${ROUNDS} rounds of A (direct), N (nginx, two hops), P (node pipe, two hops, a floor), B (tidegate, two hops) in an order shuffled per round (seed ${ARM_ORDER_SEED}), after ${WARMUP_REQUESTS} warm-up requests per arm`);

    const engine = await spawnTidegate("engine-sim", ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--port", "0", "--host", "127.0.0.1"], /(http:\/\/127\.0\.0\.1:\d+)/);
    procs.push(engine);
    const engineUrl = engine.match[1]!;
    const grpcPort = await freePort();
    const config = {
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "bench", grpcAddress: `127.0.0.1:${grpcPort}`, gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 }] }],
      // The default configuration, adaptive concurrency included (router/concurrency.ts: its limit starts at the
      // engine's ceiling, 256, and a 32-stream load never reaches it): the hop as operators run it.
      router: { host: "127.0.0.1", port: 0 },
      engines: { kind: "openai-http", urls: { [`bench/${MODEL}`]: [engineUrl] } },
    };
    const configFile = join(dir, "bench.json");
    writeFileSync(configFile, JSON.stringify(config, null, 2));
    procs.push(await spawnTidegate("region", ["region", "--config", configFile, "--region", "bench", "--log-level", "warn"], /grpc (\S+) metrics/));
    const global = await spawnTidegate("global", ["global", "--config", configFile, "--port", "0", "--log-level", "warn", "--telemetry-interval-ms", "200"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
    procs.push(global);
    const routerUrl = global.match[1]!;
    await waitAvailable(routerUrl, "bench", 15_000);
    nginx = await startNginxHops(bin, dir, new URL(engineUrl).host);
    const pipe = await startNodePipeHops(new URL(engineUrl).host);
    procs.push(...pipe.procs);
    console.log(`versions: node ${process.version}, tidegate ${version("..")}, hono ${version("hono")}, @hono/node-server ${version("@hono/node-server")}, @grpc/grpc-js ${version("@grpc/grpc-js")}, ${nginx.version}`);
    console.log(`processes: engine-sim ${engineUrl}, region gRPC 127.0.0.1:${grpcPort} (openai-http → engine-sim), global ${routerUrl}, nginx ${nginx.url} (workers ${nginx.workerPids.join(", ")}), node pipe ${pipe.url} (pids ${pipe.pids.join(", ")})`);

    const body = JSON.stringify({ model: MODEL, prompt: "The tide gate opens at dawn and", max_tokens: TOKENS, stream: true });
    const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY * 2 });
    const expectedEvents = TOKENS + NON_TOKEN_EVENTS;
    const load = (base: string, requestsPerWorker = REQUESTS_PER_WORKER, concurrency = CONCURRENCY) =>
      runLoad({ url: `${base}/v1/completions`, body, concurrency, requestsPerWorker, expectedEvents, timeoutMs: 10_000, agent });
    // Warm-up (JIT, connections, gRPC channel, nginx upstream keep-alive): WARMUP_REQUESTS each, not reported.
    const warmupPerWorker = Math.max(1, Math.ceil(WARMUP_REQUESTS / CONCURRENCY));
    for (const url of [engineUrl, nginx.url, pipe.url, routerUrl]) {
      const w = await load(url, warmupPerWorker);
      if (w.failures > 0) throw new Error(`${w.failures} of ${w.results.length} warm-up streams to ${url} failed`);
    }

    const streams: RouterFigures["streams"] = { direct: { failed: 0, total: 0 }, nginx: { failed: 0, total: 0 }, pipe: { failed: 0, total: 0 }, tidegate: { failed: 0, total: 0 } };
    const urlOf: Record<RouterArm, string> = { direct: engineUrl, nginx: nginx.url, pipe: pipe.url, tidegate: routerUrl };
    const pids: Record<string, number | undefined> = { engine: engine.child.pid, region: procs[1]!.child.pid, global: global.child.pid, nginxHop1: nginx.workerPids[0], nginxHop2: nginx.workerPids[1], pipeHop1: pipe.pids[0], pipeHop2: pipe.pids[1] };
    const cpuNow = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    /** CPU µs per token of each process since `before`. */
    const cpuPerToken = (before: Record<string, number>, tokens: number): Record<string, number> => {
      const after = cpuNow();
      return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, ((v - before[k]!) * 1e6) / Math.max(1, tokens)]));
    };
    /**
     * One round: every arm's load in round `round`'s shuffled order (armOrder), each with the CPU per token of every
     * process while it ran (and, for B, the global's and region's user / system split).
     */
    const runRound = async (round: number, requestsPerWorker?: number, concurrency?: number) => {
      const order = armOrder(round);
      const ran: Partial<Record<RouterArm, { r: LoadResult; cpu: Record<string, number> }>> = {};
      let split = "";
      for (const arm of order) {
        const before = cpuNow();
        const splitBefore = ["region", "global"].map((k) => cpuSplit(pids[k]));
        const r = await load(urlOf[arm], requestsPerWorker, concurrency);
        ran[arm] = { r, cpu: cpuPerToken(before, r.tokens) };
        if (arm === "tidegate") {
          const splitAfter = ["region", "global"].map((k) => cpuSplit(pids[k]));
          split = ["region", "global"].map((k, i) => `${k} user ${(((splitAfter[i]!.user - splitBefore[i]!.user) * 1e6) / Math.max(1, r.tokens)).toFixed(1)} sys ${(((splitAfter[i]!.sys - splitBefore[i]!.sys) * 1e6) / Math.max(1, r.tokens)).toFixed(1)}`).join(", ");
        }
        streams[arm].failed += r.failures;
        streams[arm].total += r.results.length;
      }
      return { order: order.map((arm) => ARM_LETTER[arm]).join(" "), a: ran.direct!, n: ran.nginx!, p: ran.pipe!, b: ran.tidegate!, split };
    };
    const fmtCpu = (c: Record<string, number>, keys: string[]) => keys.map((k) => `${k} ${c[k]!.toFixed(1)}`).join(", ");
    const arms = { nginx: newArm(["nginxHop1", "nginxHop2"]), pipe: newArm(["pipeHop1", "pipeHop2"]), tidegate: newArm(["engine", "region", "global"]) };
    const vsNginx: number[] = [];
    /** Each round's tidegate CPU per token over arm P's same hop: global / P's hop 1, region / P's hop 2. */
    const vsPipe = { global: [] as number[], region: [] as number[] };
    const cpuDirect: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const { order, a: ra, n: rn, p: rp, b: rb, split } = await runRound(round);
      const [a, n, p, b] = [ra.r, rn.r, rp.r, rb.r];
      const [cpuN, cpuP, cpuB] = [rn.cpu, rp.cpu, rb.cpu];
      cpuDirect.push(ra.cpu.engine!);
      for (const [arm, r, cpu] of [[arms.nginx, n, cpuN], [arms.pipe, p, cpuP], [arms.tidegate, b, cpuB]] as const) {
        arm.ratioVsDirect.push(r.tokensPerS / a.tokensPerS);
        arm.addedP50.push(r.ttftMedianMs - a.ttftMedianMs);
        arm.addedP99.push(r.ttftP99Ms - a.ttftP99Ms);
        for (const k of Object.keys(arm.cpu)) arm.cpu[k]!.push(cpu[k]!);
      }
      vsNginx.push(b.tokensPerS / n.tokensPerS);
      vsPipe.global.push(ratio(cpuB.global!, cpuP.pipeHop1!));
      vsPipe.region.push(ratio(cpuB.region!, cpuP.pipeHop2!));
      console.log(`round ${round}: order ${order}`);
      console.log(`round ${round}: ${describeRound("A direct  ", a)}`);
      console.log(`round ${round}: ${describeRound("N nginx   ", n)}`);
      console.log(`round ${round}: ${describeRound("P node pipe", p)}`);
      console.log(`round ${round}: ${describeRound("B tidegate", b)}`);
      console.log(`round ${round}: CPU µs per token (schedstat) — N: ${fmtCpu(cpuN, ["nginxHop1", "nginxHop2"])}; P: ${fmtCpu(cpuP, ["pipeHop1", "pipeHop2"])}; B: ${fmtCpu(cpuB, ["engine", "region", "global"])}; load average ${loadavg()[0]!.toFixed(2)}`);
      console.log(`round ${round}: B CPU µs per token split — ${split}`);
      console.log(`round ${round}: tidegate CPU per token over node pipe's same hop: global ${vsPipe.global.at(-1)!.toFixed(2)}, region ${vsPipe.region.at(-1)!.toFixed(2)}`);
      console.log(`round ${round}: throughput tidegate/nginx ${(b.tokensPerS / n.tokensPerS).toFixed(3)}; added TTFT p50 nginx ${(n.ttftMedianMs - a.ttftMedianMs).toFixed(3)} ms, tidegate ${(b.ttftMedianMs - a.ttftMedianMs).toFixed(3)} ms`);
    }
    // Latency without self-induced queueing: one stream at a time, the arms shuffled per round, 3 rounds of 40 requests.
    for (let round = 1; round <= 3; round++) {
      const { order, a: ra, n: rn, p: rp, b: rb } = await runRound(ROUNDS + round, 40, 1);
      const [a, n, p, b] = [ra.r, rn.r, rp.r, rb.r];
      arms.nginx.single.push(n.ttftMedianMs - a.ttftMedianMs);
      arms.pipe.single.push(p.ttftMedianMs - a.ttftMedianMs);
      arms.tidegate.single.push(b.ttftMedianMs - a.ttftMedianMs);
      console.log(`single-stream round ${round} (order ${order}): TTFT p50 direct ${a.ttftMedianMs.toFixed(2)} ms, nginx ${n.ttftMedianMs.toFixed(2)} ms (added ${(n.ttftMedianMs - a.ttftMedianMs).toFixed(3)}), node pipe ${p.ttftMedianMs.toFixed(2)} ms (added ${(p.ttftMedianMs - a.ttftMedianMs).toFixed(3)}), tidegate ${b.ttftMedianMs.toFixed(2)} ms (added ${(b.ttftMedianMs - a.ttftMedianMs).toFixed(3)}); failed ${a.failures + n.failures + p.failures + b.failures}`);
    }
    agent.destroy();
    // Call setup cost per hop (diagnostic; not a target): why the two-hop path costs more per request than per token.
    const grpcCall = await grpcDispatchCallCost(MODEL, 1000);
    const httpCall = await http1RequestCost(1000);
    console.log(`call setup, client + server in one process, 1 token per call, 1000 calls: gRPC Dispatch ${grpcCall.cpuUsPerCall.toFixed(0)} µs CPU (${grpcCall.wallMsPerCall.toFixed(3)} ms wall) per call; HTTP/1.1 keep-alive POST ${httpCall.cpuUsPerCall.toFixed(0)} µs CPU (${httpCall.wallMsPerCall.toFixed(3)} ms wall) per request; load average ${loadavg()[0]!.toFixed(2)}`);
    const t = arms.tidegate;
    const nx = arms.nginx;
    const np = arms.pipe;
    // Unrounded: the checks compare these (issue 45); only the JSON line below rounds.
    const figures = routerFiguresOf(
      { throughputVsNginx: vsNginx, addedTtftP50Ms: t.addedP50, nginxAddedTtftP50Ms: nx.addedP50, addedTtftP50MsSingleStream: t.single, cpuUsPerTokenGlobal: t.cpu.global!, cpuUsPerTokenRegion: t.cpu.region!, cpuVsNodePipeGlobal: vsPipe.global, cpuVsNodePipeRegion: vsPipe.region },
      streams,
    );
    const checks = routerChecks(figures, TARGET);
    for (const c of checks.filter((x) => !x.ok)) console.log(`target missed: ${c.check} = ${jsonFigure(c.value)} (limit ${jsonFigure(c.limit)})`);
    const result = {
      bench: "router",
      throughputVsNginx: shown(figures.throughputVsNginx, 4),
      addedTtftP50Ms: shown(figures.addedTtftP50Ms, 3),
      nginxAddedTtftP50Ms: shown(figures.nginxAddedTtftP50Ms, 3),
      addedTtftP50MsSingleStream: shown(figures.addedTtftP50MsSingleStream, 3),
      nginxAddedTtftP50MsSingleStream: shown(med(nx.single), 3),
      cpuUsPerToken: { global: shown(figures.cpuUsPerToken.global, 1), region: shown(figures.cpuUsPerToken.region, 1), engine: shown(med(t.cpu.engine!), 1), nginxHop1: shown(med(nx.cpu.nginxHop1!), 1), nginxHop2: shown(med(nx.cpu.nginxHop2!), 1), engineDirect: shown(med(cpuDirect), 1) },
      cpuVsNodePipe: { global: shown(figures.cpuVsNodePipe.global, 3), region: shown(figures.cpuVsNodePipe.region, 3) },
      failedStreams: Object.values(streams).reduce((x, a) => x + a.failed, 0),
      streams,
      twoHopThroughputRatio: shown(med(t.ratioVsDirect), 4),
      nginxThroughputRatio: shown(med(nx.ratioVsDirect), 4),
      addedTtftP99Ms: shown(med(t.addedP99), 3),
      nginxAddedTtftP99Ms: shown(med(nx.addedP99), 3),
      // Arm P, the floor of a Node hop (no target): bare byte relays, same load, same run.
      nodePipe: { throughputRatio: shown(med(np.ratioVsDirect), 4), addedTtftP50Ms: shown(med(np.addedP50), 3), addedTtftP50MsSingleStream: shown(med(np.single), 3), cpuUsPerToken: { hop1: shown(med(np.cpu.pipeHop1!), 1), hop2: shown(med(np.cpu.pipeHop2!), 1) } },
      grpcDispatchCallCpuUs: Number(grpcCall.cpuUsPerCall.toFixed(0)),
      http1RequestCpuUs: Number(httpCall.cpuUsPerCall.toFixed(0)),
      loadAverage1m: Number(loadavg()[0]!.toFixed(2)),
      rounds: ROUNDS,
      armOrderSeed: ARM_ORDER_SEED,
      streamsPerRound: CONCURRENCY * REQUESTS_PER_WORKER,
      path: "global --framed mux--> region --HTTP(openai-http)--> engine-sim vs nginx --> nginx --> engine-sim vs node pipe --> node pipe --> engine-sim vs engine-sim",
      target: TARGET,
      checks: checks.map((c) => ({ ...c, value: jsonFigure(c.value), limit: jsonFigure(c.limit) })),
      ...verdictFields(checks),
    };
    console.log(JSON.stringify(result));
  } finally {
    await nginx?.stop();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** met, the checks missed and, for a partial run, what shrank it (verdicts/common.ts). */
function verdictFields(checks: readonly { check: string; ok: boolean }[]): { met: boolean; missed?: string[]; partial?: true; shrunk?: string[] } {
  const v = verdictOf(checks, SHRUNK);
  return { met: v.met, ...(v.missed.length > 0 ? { missed: v.missed } : {}), ...(v.partial === true ? { partial: true, shrunk: v.shrunk } : {}) };
}

main().catch(async (err: unknown) => {
  console.error(err);
  await stopAll();
  console.log(JSON.stringify({ bench: "router", error: err instanceof Error ? err.message.split("\n")[0] : String(err), target: TARGET, met: false }));
  process.exitCode = 0;
});
