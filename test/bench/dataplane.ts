/**
 * bench:dataplane — the native data plane against limits measured in the same run (BENCH.md).
 *
 * 1. Point-to-point over loopback: a model of M bytes (b blocks) from one `tidegate agent` process to another,
 *    alternating with the plain C sender/receiver pair (native/bench/tcp_pair.c) moving the same bytes: A B A B.
 *    Both arms are timed the same way: M bytes from distinct, populated memory into distinct, populated memory
 *    (allocated as a BlockStore is), at most tcpCallBytes() per send and per recv call, from the sender starting to dial
 *    to the receiver holding the last byte (tidegate: its block verified), both read on CLOCK_MONOTONIC. The
 *    receiver is ready before the sender starts in both, and the pair's processes have exited before tidegate's turn. Figure: median of tidegate Gbit/s ÷ raw TCP Gbit/s per
 *    pair. Target ≥ 0.90. Profile: memcpy and checksum bytes/s (native measureCosts), dial time, time spent
 *    checksumming, send/recv calls and epoll waits per run.
 * 2. 1 → N multicast (λScale's notation: N nodes in all, one source, N − 1 receivers), N = 2, 4, 8, of M bytes
 *    in b = 16 blocks, every node a `tidegate agent` in its own network namespace, every link shaped to B with tc
 *    tbf both ways. Each algorithm against its own ideal (nodes/multicast/ideal.ts): chain M/B + (N − 2)·(M/b)/B,
 *    binomial (b + ⌈log₂N⌉ − 1)·(M/b)/B (λScale §4.2), unicast (N − 1)·M/B, tree ≈ 2·M/B + …. Target: chain and
 *    binomial ≤ 1.15 × ideal at every N of 2, 4, 8. Also the time to the first block at every receiver (λScale Fig. 8).
 *    λScale's baselines (§7.1–7.2, Fig. 7): FaaSNet's binary tree (`tree`) and an NCCL-style ring broadcast
 *    (`ring`: the chain in rank order, after its group set-up — a fresh ring bootstrap run, planRingBootstrap in
 *    nodes/multicast/baselines.ts, timed and added). Per algorithm also its GPU time: instance-seconds until
 *    serving, summed over receivers (each receiver's last block, plus the ring's set-up). Printed at every N:
 *    binomial (k = 1 source) against the tree and the ring. Target: binomial ≥ 1.5× faster than the binary tree at
 *    8 targets (N = 9; λScale reports up to 1.82× over FaaSNet and 1.53× over NCCL).
 *    At every N ≥ 4 also λScale's k-way arm (issue 35): binomial from k = 2 sources (n0 and n1) to the other N − 2
 *    nodes with Algorithm 1's shifted chunk orders; figures: its time against the slowest sub-group's binomial ideal,
 *    when each execution pipeline formed on the measured arrivals (the agents actuator's tracker,
 *    region/liveload/live-lambda.ts), and GPU time until serving per receiver (a pipeline's members from its
 *    formation) beside binomial k = 1's. Reported, not judged.
 * 3. Heterogeneous links (one fast target, the rest slow): BlitzScale's bandwidth-ordered chains vs the same greedy
 *    in insertion order (fast target listed last). Figure: time to the first full copy. Target: bandwidth < insertion.
 *
 * Inputs (environment): DATAPLANE_MODEL_BYTES (default 1 GiB), DATAPLANE_BLOCKS (16), DATAPLANE_RATE_MBIT (500: with 7–8 links busy at once, 1000 Mbit/s per link was CPU-bound on this shared 2-core box, chain 1.48× ideal at N = 8 in a 256 MiB trial),
 * DATAPLANE_NODES ("2,4,8,9"), DATAPLANE_P2P_ROUNDS (7: this shared box swings by 2× between rounds), DATAPLANE_HETERO_BYTES (256 MiB), DATAPLANE_SLOW_MBIT (250),
 * DATAPLANE_ALGORITHMS ("chain,binomial,tree,unicast,ring"; shorter lists are for development runs), DATAPLANE_MTU (9000:
 * jumbo frames as on datacenter fabrics; tbf counts header bytes, so at 1500 a single TCP flow carries ≈ 94% of B),
 * DATAPLANE_STALL_MS (3000 for multicast runs; the default role setting and the tests use 1000), DATAPLANE_P2P_ONLY
 * (1: run part 1 only, for development). Any of them set makes the run partial: met false, `shrunk` names them
 * (verdicts/dataplane.ts: chain and binomial are judged at every N of 2, 4, 8).
 * Needs root for namespaces; without it parts 2–3 are reported as not run. The last line is one JSON object.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus, freemem, loadavg, release, totalmem } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { measureCosts, probeVerbs, tcpCallBytes, type RunResult } from "../../native/index.js";
import { repoRoot } from "../../core/paths.js";
import { planBinaryTree, planRingBootstrap, planRingBroadcast, planUnicast } from "../../nodes/multicast/baselines.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import { idealSeconds } from "../../nodes/multicast/ideal.js";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import { VirtualClock } from "../../core/clock.js";
import { LiveLambdaPipelines } from "../../region/liveload/live-lambda.js";
import type { MulticastAlgorithm, MulticastPlan } from "../../nodes/multicast/schedule.js";
import { validatePlan } from "../../nodes/multicast/validate.js";
import { spawnAll, stopAgents, type RunningAgent } from "../netns/agents.js";
import { createTopology, netnsUnavailable, type Topology } from "../netns/topology.js";
import { envOverrides, jsonFigure, partialFields } from "./verdicts/common.js";
import { binomialOverTree, dataplaneMet } from "./verdicts/dataplane.js";

const MiB = 1 << 20;
const env = (k: string, d: number) => (process.env[k] === undefined ? d : Number(process.env[k]));
const M = env("DATAPLANE_MODEL_BYTES", 1024 * MiB);
const B_BLOCKS = env("DATAPLANE_BLOCKS", 16);
const RATE_MBIT = env("DATAPLANE_RATE_MBIT", 500);
const NODES = (process.env.DATAPLANE_NODES ?? "2,4,8,9").split(",").map(Number);
const P2P_ROUNDS = env("DATAPLANE_P2P_ROUNDS", 7);
const HETERO_M = env("DATAPLANE_HETERO_BYTES", 256 * MiB);
const SLOW_MBIT = env("DATAPLANE_SLOW_MBIT", 250);
const MTU = env("DATAPLANE_MTU", 9000);
// The bench measures throughput; 1-s failure detection is what the tests prove. With 7 flows into one 10 ms tbf
// queue (unicast, N = 8) a TCP retransmission timeout can silence a healthy flow for over a second.
const STALL_MS = env("DATAPLANE_STALL_MS", 3000);
const ALGORITHMS = (process.env.DATAPLANE_ALGORITHMS ?? "chain,binomial,tree,unicast,ring").split(",") as MulticastAlgorithm[];
const P2P_ONLY = process.env.DATAPLANE_P2P_ONLY === "1";
const TARGET = { p2pFractionOfRawTcp: 0.9, multicastTimeOverIdealMax: 1.15, bandwidthOrderFirstCopySooner: true, nodes: [2, 4, 8], binomialOverTreeMin: 1.5, speedupNodes: 9 };
/** Settings that change or shrink what a run measures (fewer nodes, rounds, algorithms, bytes): partial, met false. */
const SHRUNK = envOverrides(["DATAPLANE_MODEL_BYTES", "DATAPLANE_BLOCKS", "DATAPLANE_RATE_MBIT", "DATAPLANE_NODES", "DATAPLANE_P2P_ROUNDS", "DATAPLANE_HETERO_BYTES", "DATAPLANE_SLOW_MBIT", "DATAPLANE_MTU", "DATAPLANE_STALL_MS", "DATAPLANE_ALGORITHMS", "DATAPLANE_P2P_ONLY"]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const gbit = (bytes: number, s: number) => (bytes * 8) / s / 1e9;
let runId = Math.floor(Math.random() * 1e9);

function log(line: string): void {
  process.stdout.write(line + "\n");
}

/** One point-to-point transfer, timed from the sender starting to dial to the receiver holding the last byte. */
interface P2pTiming {
  gbit: number;
  /** Sender: dial start to connected (tidegate: every peer dialed and its hello queued). */
  dialMs: number;
  /** Sender's dial start to the receiver's first payload byte. */
  firstByteMs: number;
  recvCalls: number;
  sendCalls: number;
}

/** The lines a child process writes to stdout, one at a time; rejects when it exits before writing one. */
function lineReader(proc: ReturnType<typeof spawn>, what: string): () => Promise<string> {
  const it = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const exited = new Promise<never>((_, reject) => proc.once("exit", (code, sig) => reject(new Error(`${what} exited (${code ?? sig}) before printing its result`))));
  exited.catch(() => undefined);
  return async () => {
    const r = await Promise.race([it.next(), exited]);
    if (r.done === true) throw new Error(`${what} closed stdout before printing its result`);
    return r.value as string;
  };
}

/** Resolves when `proc` has exited (at once if it already has). */
function exited(proc: ReturnType<typeof spawn>): Promise<void> {
  return proc.exitCode !== null || proc.signalCode !== null ? Promise.resolve() : new Promise((r) => proc.once("exit", () => r()));
}

/**
 * One raw TCP transfer of `bytes` over loopback with the C pair, at most `chunk.send` / `chunk.recv` bytes per call.
 * Returns after both processes exited, so freeing their memory does not overlap the next arm.
 */
async function rawTcp(bytes: number, chunk: { send: number; recv: number }): Promise<P2pTiming> {
  const bin = join(repoRoot(), "native", "build", "tcp_pair");
  const recv = spawn(bin, ["recv", "0", String(bytes), String(chunk.recv)], { stdio: ["ignore", "pipe", "inherit"] });
  let send: ReturnType<typeof spawn> | undefined;
  try {
    const recvLine = lineReader(recv, "tcp_pair recv");
    const port = Number(/^LISTEN (\d+)$/.exec(await recvLine())?.[1]);
    send = spawn(bin, ["send", "127.0.0.1", String(port), String(bytes), String(chunk.send)], { stdio: ["ignore", "pipe", "inherit"] });
    const [r, s] = await Promise.all([recvLine(), lineReader(send, "tcp_pair send")()]);
    const rm = /^RECV (\d+) ([\d.]+) ([\d.]+) (\d+)$/.exec(r);
    const sm = /^SEND (\d+) ([\d.]+) ([\d.]+) (\d+)$/.exec(s);
    if (rm === null || sm === null || Number(rm[1]) !== bytes) throw new Error(`tcp_pair: unexpected result lines: ${r} | ${s}`);
    const start = Number(sm[2]);
    return { gbit: gbit(bytes, (Number(rm[3]) - start) / 1000), dialMs: Number(sm[3]) - start, firstByteMs: Number(rm[2]) - start, recvCalls: Number(rm[4]), sendCalls: Number(sm[4]) };
  } finally {
    for (const p of [recv, send]) if (p !== undefined && p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    await Promise.all([exited(recv), ...(send === undefined ? [] : [exited(send)])]);
  }
}

/** One tidegate transfer agent p0 → agent p1, timed like rawTcp; the receiver's run starts first. */
async function tidegateP2p(p2p: RunningAgent[], bytes: number, blocks: number): Promise<P2pTiming & { checksumMs: number; waits: number; receiverMs: number }> {
  const plan = planUnicast({ model: { totalBytes: bytes, blockCount: blocks }, source: "p0", targets: ["p1"] });
  await p2p[1]!.client.load({ model: "p2p", totalBytes: bytes, blockCount: blocks, fill: "empty" });
  const addresses = { p0: p2p[0]!.data, p1: p2p[1]!.data };
  const id = runId++;
  const receiving = p2p[1]!.client.run({ model: "p2p", plan, runId: id, addresses });
  receiving.catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100)); // the receiver's run is waiting in epoll, as tcp_pair recv waits in accept
  const [send, recv]: [RunResult, RunResult] = await Promise.all([p2p[0]!.client.run({ model: "p2p", plan, runId: id, addresses }), receiving]);
  const v = await p2p[1]!.client.verify("p2p", 1);
  if (v.firstMismatch !== -1) throw new Error(`p2p: block ${v.firstMismatch} differs`);
  const s = send.profile;
  const r = recv.profile;
  if (r.startMonoMs > s.startMonoMs) log(`  (the receiver's run started ${(r.startMonoMs - s.startMonoMs).toFixed(1)} ms after the sender's; timed from the receiver's start)`);
  const start = Math.max(s.startMonoMs, r.startMonoMs);
  const stop = r.startMonoMs + r.lastByteMs;
  return {
    gbit: gbit(bytes, (stop - start) / 1000),
    dialMs: s.dialMs,
    firstByteMs: r.startMonoMs + r.firstByteMs - start,
    recvCalls: r.recvCalls,
    sendCalls: s.sendCalls,
    checksumMs: r.checksumMs,
    waits: r.waits,
    receiverMs: recv.elapsedMs,
  };
}

interface Timed {
  /** Per receiver: [first block s, last block s] on its own run clock. */
  perNode: Map<string, { firstS: number; lastS: number }>;
  /** Per receiver: each block's arrival (s, its run clock). */
  blocks: Map<string, number[]>;
  completionS: number;
}

async function runPlan(agents: RunningAgent[], plan: MulticastPlan, model: string): Promise<Timed> {
  validatePlan(plan);
  const inPlan = agents.filter((a) => plan.sources.includes(a.nodeId) || plan.targets.includes(a.nodeId));
  await Promise.all(inPlan.filter((a) => !plan.sources.includes(a.nodeId)).map((a) => a.client.load({ model, totalBytes: plan.totalBytes, blockCount: plan.blockCount, fill: "empty" })));
  const addresses = Object.fromEntries(inPlan.map((a) => [a.nodeId, a.data]));
  const id = runId++;
  const results = await Promise.all(inPlan.map((a) => a.client.run({ model, plan, runId: id, addresses, connectMs: 5000, stallMs: STALL_MS }).then((r) => [a.nodeId, r] as const)));
  const perNode = new Map<string, { firstS: number; lastS: number }>();
  const blocks = new Map<string, number[]>();
  for (const [node, r] of results) {
    if (plan.sources.includes(node)) continue;
    const at = r.arrivals.map((x) => x.atMs / 1000);
    perNode.set(node, { firstS: Math.min(...at), lastS: Math.max(...at) });
    const row = new Array<number>(plan.blockCount).fill(Infinity);
    for (const x of r.arrivals) row[x.block] = Math.min(row[x.block]!, x.atMs / 1000);
    blocks.set(node, row);
  }
  await Promise.all(
    inPlan
      .filter((a) => !plan.sources.includes(a.nodeId))
      .map(async (a) => {
        const v = await a.client.verify(model, 1);
        if (v.firstMismatch !== -1) throw new Error(`${a.nodeId}: block ${v.firstMismatch} differs from the source after ${plan.algorithm}`);
      }),
  );
  return { perNode, blocks, completionS: Math.max(...[...perNode.values()].map((x) => x.lastS)) };
}

function planFor(alg: MulticastAlgorithm, model: { totalBytes: number; blockCount: number }, n: number): MulticastPlan {
  const targets = [...Array(n - 1).keys()].map((i) => `n${i + 1}`);
  switch (alg) {
    case "chain":
      return planChains({ model, sources: [{ id: "n0", outBytesPerS: 1 }], targets: targets.map((id) => ({ id, inBytesPerS: 1 })) });
    case "binomial":
      return planBinomial({ model, sources: ["n0"], targets });
    case "tree":
      return planBinaryTree({ model, source: "n0", targets });
    case "unicast":
      return planUnicast({ model, source: "n0", targets });
    case "ring":
      return planRingBroadcast({ model, source: "n0", targets });
  }
}

/** Every figure the last line reports; filled as the parts run, so a failed run still reports what it measured. */
const figures: {
  p2p: { ratios: number[]; raws: number[]; ours: number[]; profile?: Record<string, number> };
  multicast: Record<string, Record<string, MulticastFigure>>;
  firstBlock: Record<string, Record<string, number[]>>;
  kWay: Record<string, KWayFigure>;
  hetero?: { bandwidthFirstCopyS: number; insertionFirstCopyS: number };
  notRun?: string;
} = { p2p: { ratios: [], raws: [], ours: [] }, multicast: {}, firstBlock: {}, kWay: {} };

/**
 * λScale's k-way arm at one N (k = 2 sources, N − 2 receivers): the transfer, its ideal (the slowest sub-group's
 * 1 → L binomial), when each execution pipeline formed on the measured arrivals, and GPU time until serving.
 */
interface KWayFigure {
  seconds: number;
  ideal: number;
  /** Per pipeline of two or more receivers: when its members together held every block (s). */
  pipelinesFormedS: number[];
  /** Σ over receivers of when it could serve: its pipeline's formation, else its last block (instance-seconds). */
  gpuSeconds: number;
  /** gpuSeconds per receiver, beside binomial k = 1's at the same N (its last block per receiver). */
  perReceiverS: number;
  k1PerReceiverS?: number;
}

/** One algorithm at one N: transfer time, its ideal, set-up before it (ring), and GPU time until serving. */
interface MulticastFigure {
  seconds: number;
  ideal: number;
  ratio: number;
  /** Group set-up run before the transfer (ring: its bootstrap); 0 for the others. */
  setupS: number;
  /** Σ over receivers of (set-up + its last block's arrival): instance-seconds until serving. */
  gpuSeconds: number;
}

const GB = 1e9;
const r2 = (x: number) => Number(x.toFixed(2));

async function pointToPoint(): Promise<void> {
  const chunk = tcpCallBytes();
  log("\n[1] point-to-point over loopback: raw TCP (C pair, A) vs tidegate agent → agent (B), A B A B …");
  log(`  both arms: ${M} bytes from distinct populated memory into distinct populated memory (BlockStore's allocation), ≤ ${chunk.send} bytes per send and ≤ ${chunk.recv} per recv call;`);
  log("  timed from the sender starting to dial to the receiver holding the last byte (tidegate: last block verified), CLOCK_MONOTONIC;");
  log("  the receiver waits (accept / epoll) before the sender starts; figure = median over rounds of B Gbit/s ÷ A Gbit/s");
  const costBytes = Math.min(M, 256 * MiB);
  const cost = measureCosts(costBytes, Math.ceil(M / B_BLOCKS / 8) * 8, chunk.recv);
  log(
    `  profile (native measureCosts over ${costBytes} bytes): memcpy ${(cost.memcpyBytesPerS / GB).toFixed(2)} GB/s; block checksum (cold) ${(cost.checksumBytesPerS / GB).toFixed(2)} GB/s; ` +
      `arrival checksum alone (hot, ${chunk.recv >> 10} KiB pieces) ${(cost.arrivalChecksumBytesPerS / GB).toFixed(2)} GB/s; memcpy then arrival checksum ${(cost.copyThenChecksumBytesPerS / GB).toFixed(2)} GB/s`,
  );
  const p2p = await spawnAll(["p0", "p1"].map((nodeId) => ({ nodeId, host: "127.0.0.1" })));
  const dials: number[] = [];
  const rawDials: number[] = [];
  const sumShare: number[] = [];
  try {
    await p2p[0]!.client.load({ model: "p2p", totalBytes: M, blockCount: B_BLOCKS, fill: "pattern", seed: 1 });
    for (let r = 0; r < P2P_ROUNDS; r++) {
      const raw = await rawTcp(M, chunk);
      const tg = await tidegateP2p(p2p, M, B_BLOCKS);
      const transferMs = (M * 8) / (tg.gbit * 1e9) * 1000;
      figures.p2p.raws.push(raw.gbit);
      figures.p2p.ours.push(tg.gbit);
      figures.p2p.ratios.push(tg.gbit / raw.gbit);
      dials.push(tg.dialMs);
      rawDials.push(raw.dialMs);
      sumShare.push(tg.checksumMs / transferMs);
      log(
        `  round ${r + 1}: A raw TCP ${raw.gbit.toFixed(2)} Gbit/s (dial ${raw.dialMs.toFixed(2)} ms, first byte ${raw.firstByteMs.toFixed(2)} ms, ${raw.sendCalls} sends, ${raw.recvCalls} recvs) | ` +
          `B tidegate ${tg.gbit.toFixed(2)} Gbit/s (dial ${tg.dialMs.toFixed(2)} ms, first byte ${tg.firstByteMs.toFixed(2)} ms, ${tg.sendCalls} sends, ${tg.recvCalls} recvs, ${tg.waits} epoll waits, ` +
          `checksum ${tg.checksumMs.toFixed(0)} ms = ${((100 * tg.checksumMs) / transferMs).toFixed(0)}% of the transfer, receiver run ${tg.receiverMs.toFixed(0)} ms; checksums verified) | ratio ${(tg.gbit / raw.gbit).toFixed(3)}`,
      );
    }
  } finally {
    await stopAgents(p2p);
  }
  figures.p2p.profile = {
    memcpyGBps: r2(cost.memcpyBytesPerS / GB),
    checksumGBps: r2(cost.checksumBytesPerS / GB),
    arrivalChecksumGBps: r2(cost.arrivalChecksumBytesPerS / GB),
    copyThenChecksumGBps: r2(cost.copyThenChecksumBytesPerS / GB),
    dialMs: Number(median(dials).toFixed(3)),
    rawDialMs: Number(median(rawDials).toFixed(3)),
    checksumShareOfTransfer: Number(median(sumShare).toFixed(3)),
  };
  log(`  median ratio ${median(figures.p2p.ratios).toFixed(3)} (target ≥ ${TARGET.p2pFractionOfRawTcp}); median raw ${median(figures.p2p.raws).toFixed(2)} Gbit/s, tidegate ${median(figures.p2p.ours).toFixed(2)} Gbit/s; median dial ${median(dials).toFixed(2)} ms (raw ${median(rawDials).toFixed(2)} ms)`);
}

/**
 * The ring's group set-up: a fresh bootstrap run around the ring (planRingBootstrap), as a new NCCL group is formed
 * for each scaling event (λScale §7.1). Returns its time (s, the last rank's arrival on its run clock, dials included).
 */
async function ringSetup(agents: RunningAgent[]): Promise<number> {
  const plan = planRingBootstrap("n0", agents.slice(1).map((a) => a.nodeId));
  await agents[0]!.client.load({ model: "ring-bootstrap", totalBytes: plan.totalBytes, blockCount: plan.blockCount, fill: "pattern", seed: 1 }); // runPlan verifies against seed 1
  const t = await runPlan(agents, plan, "ring-bootstrap");
  await Promise.all(agents.map((a) => a.client.drop("ring-bootstrap")));
  return t.completionS;
}

/**
 * λScale's k-way transmission (§4.2, Algorithms 1–2) from k = 2 sources (n0 and n1 hold the model) to the other
 * N − 2 nodes: the sub-groups get the chunks in shifted orders, so each execution pipeline (a receiver from each
 * sub-group) holds every block after about b/k steps. Formation is found on the measured arrivals with the live
 * tracker the agents actuator runs (region/liveload/live-lambda.ts), replayed in arrival order.
 */
async function kWayArm(agents: RunningAgent[], n: number, Bps: number): Promise<KWayFigure> {
  const sources = ["n0", "n1"];
  const targets = [...Array(n - 2).keys()].map((i) => `n${i + 2}`);
  await agents[1]!.client.load({ model: "m", totalBytes: M, blockCount: B_BLOCKS, fill: "pattern", seed: 1 });
  const plan = planBinomial({ model: { totalBytes: M, blockCount: B_BLOCKS }, sources, targets });
  const t = await runPlan(agents.slice(0, n), plan, "m");
  const clock = new VirtualClock(0);
  const formed: { nodes: string[]; atS: number }[] = [];
  const tracker = new LiveLambdaPipelines({ clock, onFormed: (p) => formed.push({ nodes: p.nodes, atS: clock.now() / 1000 }) });
  tracker.plan("m", plan);
  const arrivals = [...t.blocks].flatMap(([node, row]) => row.map((s, block) => ({ node, block, s }))).sort((a, b) => a.s - b.s);
  for (const a of arrivals) {
    clock.advanceToSync(Math.max(clock.now(), a.s * 1000));
    tracker.block("m", a.node, a.block);
  }
  const serves = new Map([...t.perNode].map(([node, x]) => [node, x.lastS]));
  for (const f of formed) for (const node of f.nodes) serves.set(node, Math.min(serves.get(node)!, f.atS));
  const gpuSeconds = [...serves.values()].reduce((a, x) => a + x, 0);
  const ideal = Math.max(...plan.subGroups!.map((g) => idealSeconds("binomial", { totalBytes: M, blockCount: B_BLOCKS, nodes: g.nodes.length + 1, linkBytesPerS: Bps })));
  return { seconds: t.completionS, ideal, pipelinesFormedS: formed.map((f) => f.atS), gpuSeconds, perReceiverS: gpuSeconds / targets.length };
}

/** Binomial (k = 1) against the tree and the ring (its set-up included): time speed-ups and GPU-time ratios. */
function lambdaScaleVsBaselines(m: Record<string, MulticastFigure>): { overTree: number; overRing: number; gpuVsTree: number; gpuVsRing: number } | undefined {
  const b = m.binomial;
  if (b === undefined || m.tree === undefined || m.ring === undefined) return undefined;
  return { overTree: m.tree.seconds / b.seconds, overRing: (m.ring.setupS + m.ring.seconds) / b.seconds, gpuVsTree: b.gpuSeconds / m.tree.gpuSeconds, gpuVsRing: b.gpuSeconds / m.ring.gpuSeconds };
}

async function multicastParts(): Promise<void> {
  const maxN = Math.max(...NODES, 4);
  const topo: Topology = createTopology(new Array<number>(maxN).fill(RATE_MBIT), MTU);
  let agents: RunningAgent[] = [];
  try {
    agents = await spawnAll(topo.nodes.map((n) => ({ nodeId: n.name, ns: n.ns, host: n.ip })));
    const Bps = (RATE_MBIT * 1e6) / 8;
    log(`\n[2] 1 → N multicast of ${M} bytes, b = ${B_BLOCKS}, every link ${RATE_MBIT} Mbit/s = ${(Bps / MiB).toFixed(1)} MiB/s, MTU ${topo.mtu} (namespaces ${topo.nodes.map((n) => n.ns).join(" ")})`);
    await agents[0]!.client.load({ model: "m", totalBytes: M, blockCount: B_BLOCKS, fill: "pattern", seed: 1 });
    for (const n of NODES) {
      const multicast = (figures.multicast[`N${n}`] = {} as Record<string, MulticastFigure>);
      const firstBlock = (figures.firstBlock[`N${n}`] = {} as Record<string, number[]>);
      for (const alg of ALGORITHMS) {
        const plan = planFor(alg, { totalBytes: M, blockCount: B_BLOCKS }, n);
        const setupS = alg === "ring" ? await ringSetup(agents.slice(0, n)) : 0;
        const t = await runPlan(agents.slice(0, n), plan, "m");
        const ideal = idealSeconds(alg, { totalBytes: M, blockCount: B_BLOCKS, nodes: n, linkBytesPerS: Bps });
        const gpuSeconds = [...t.perNode.values()].reduce((a, x) => a + setupS + x.lastS, 0);
        multicast[alg] = { seconds: t.completionS, ideal, ratio: t.completionS / ideal, setupS, gpuSeconds };
        firstBlock[alg] = [...t.perNode.values()].map((x) => Number(x.firstS.toFixed(3)));
        log(`  N=${n} ${alg.padEnd(8)} ${t.completionS.toFixed(2)} s vs ideal ${ideal.toFixed(2)} s → ${(t.completionS / ideal).toFixed(3)}×${alg === "ring" ? ` (+ group set-up ${(setupS * 1000).toFixed(1)} ms before it)` : ""}; GPU time ${gpuSeconds.toFixed(2)} instance-s; first block at receivers (s): ${[...t.perNode.entries()].map(([k, v]) => `${k} ${v.firstS.toFixed(2)}`).join(", ")}; last: ${[...t.perNode.entries()].map(([k, v]) => `${k} ${v.lastS.toFixed(2)}`).join(", ")}`);
      }
      if (n >= 4 && ALGORITHMS.includes("binomial")) {
        const k = (figures.kWay[`N${n}`] = await kWayArm(agents, n, Bps));
        if (multicast.binomial !== undefined) k.k1PerReceiverS = multicast.binomial.gpuSeconds / (n - 1);
        log(`  N=${n} binomial k = 2 (n0, n1 → ${n - 2} receivers) ${k.seconds.toFixed(2)} s vs ideal ${k.ideal.toFixed(2)} s → ${(k.seconds / k.ideal).toFixed(3)}×; execution pipelines formed at ${k.pipelinesFormedS.map((x) => x.toFixed(2)).join(", ") || "none"} s; GPU time until serving ${k.gpuSeconds.toFixed(2)} instance-s = ${k.perReceiverS.toFixed(2)} s per receiver${k.k1PerReceiverS === undefined ? "" : ` (k = 1: ${k.k1PerReceiverS.toFixed(2)} s per receiver)`}`);
      }
      await Promise.all(agents.slice(1, n).map((a) => a.client.drop("m")));
      const vs = lambdaScaleVsBaselines(multicast);
      if (vs !== undefined) log(`  N=${n} (${n - 1} targets) binomial k = 1 against λScale's baselines: ${vs.overTree.toFixed(2)}× faster than the binary tree, ${vs.overRing.toFixed(2)}× faster than the ring broadcast with its set-up; GPU time ${vs.gpuVsTree.toFixed(3)} × the tree's, ${vs.gpuVsRing.toFixed(3)} × the ring's`);
    }
    // 3. heterogeneous links: n1 fast, n2 and n3 slow; the insertion order lists the fast target last
    topo.shape(topo.nodes[2]!, SLOW_MBIT);
    topo.shape(topo.nodes[3]!, SLOW_MBIT);
    log(`\n[3] heterogeneous links: n0 and n1 at ${RATE_MBIT} Mbit/s, n2 and n3 at ${SLOW_MBIT} Mbit/s; model ${HETERO_M} bytes, b = ${B_BLOCKS}`);
    await agents[0]!.client.load({ model: "h", totalBytes: HETERO_M, blockCount: B_BLOCKS, fill: "pattern", seed: 1 });
    const bw = (i: number) => (topo.nodes[i]!.rateMbit * 1e6) / 8;
    const input = { model: { totalBytes: HETERO_M, blockCount: B_BLOCKS }, sources: [{ id: "n0", outBytesPerS: bw(0) }], targets: [2, 3, 1].map((i) => ({ id: `n${i}`, inBytesPerS: bw(i) })) };
    const res: Record<string, number> = {};
    for (const order of ["bandwidth", "insertion"] as const) {
      const plan = planChains({ ...input, order });
      const t = await runPlan(agents.slice(0, 4), plan, "h");
      res[order] = Math.min(...[...t.perNode.values()].map((x) => x.lastS));
      log(`  ${order.padEnd(9)} chains ${plan.chains!.map((c) => c.join("→")).join(" | ")}: first full copy ${res[order]!.toFixed(2)} s, all done ${t.completionS.toFixed(2)} s (per node: ${[...t.perNode.entries()].map(([k, v]) => `${k} ${v.lastS.toFixed(2)}`).join(", ")})`);
    }
    figures.hetero = { bandwidthFirstCopyS: res.bandwidth!, insertionFirstCopyS: res.insertion! };
  } finally {
    await stopAgents(agents);
    topo.destroy();
  }
}

async function main(): Promise<void> {
  const verbs = probeVerbs();
  const pkg = JSON.parse(readFileSync(join(repoRoot(), "package.json"), "utf8")) as { version: string };
  log(`bench:dataplane — tidegate ${pkg.version}, node ${process.version}, linux ${release()}`);
  log(`machine: nproc ${cpus().length} (${cpus()[0]?.model ?? "?"}), memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB (${(freemem() / 2 ** 30).toFixed(1)} GiB free), load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  log(`verbs: ${verbs.compiled ? "compiled in" : "not compiled"}, ${verbs.devices} device(s): ${verbs.detail} → TCP transport`);
  log(`inputs: model M = ${M} bytes in b = ${B_BLOCKS} blocks; links B = ${RATE_MBIT} Mbit/s (tbf both ways); stall timeout ${STALL_MS} ms; N = ${NODES.join(", ")}; p2p rounds ${P2P_ROUNDS}; heterogeneous M = ${HETERO_M} bytes, slow links ${SLOW_MBIT} Mbit/s`);
  await pointToPoint();
  const why = P2P_ONLY ? "DATAPLANE_P2P_ONLY=1" : netnsUnavailable();
  if (why !== undefined) {
    figures.notRun = why;
    log(`\n[2], [3] not run: ${why}`);
  } else await multicastParts();
}

/** The last line (BENCH.md): every figure measured, the targets, met, and the error when the run failed. */
function lastLine(error: string | undefined): string {
  const { p2p, multicast, firstBlock, hetero } = figures;
  const p2pFraction = p2p.ratios.length > 0 ? median(p2p.ratios) : null;
  // Over the N the target judges (2, 4, 8); N = 9 is there for the comparison with the tree at 8 targets.
  const worstOf = Object.entries(multicast).filter(([k]) => TARGET.nodes.some((n) => k === `N${n}`)).flatMap(([, m]) => [m.chain?.ratio ?? Infinity, m.binomial?.ratio ?? Infinity]);
  const worst = worstOf.length > 0 ? Math.max(...worstOf) : null;
  const met = dataplaneMet({ error, p2pFraction, notRun: figures.notRun, multicast, hetero, shrunk: SHRUNK }, TARGET);
  return JSON.stringify({
    bench: "dataplane",
    modelBytes: M,
    blocks: B_BLOCKS,
    linkMbit: RATE_MBIT,
    mtu: MTU,
    p2pRounds: p2p.ratios.length,
    p2pFractionOfRawTcp: p2pFraction === null ? null : Number(p2pFraction.toFixed(3)),
    p2pRatios: p2p.ratios.map((x) => Number(x.toFixed(3))),
    rawTcpGbit: p2p.raws.length > 0 ? r2(median(p2p.raws)) : null,
    tidegateGbit: p2p.ours.length > 0 ? r2(median(p2p.ours)) : null,
    p2pProfile: p2p.profile ?? null,
    multicastTimeOverIdeal: Object.fromEntries(Object.entries(multicast).map(([k, v]) => [k, Object.fromEntries(Object.entries(v).map(([a, x]) => [a, { s: r2(x.seconds), idealS: r2(x.ideal), ratio: Number(x.ratio.toFixed(3)), ...(x.setupS > 0 ? { setupS: Number(x.setupS.toFixed(4)) } : {}), gpuS: r2(x.gpuSeconds) }]))])),
    lambdaScaleVsBaselines: Object.fromEntries(Object.entries(multicast).flatMap(([k, v]) => {
      const vs = lambdaScaleVsBaselines(v);
      return vs === undefined ? [] : [[k, Object.fromEntries(Object.entries(vs).map(([a, x]) => [a, Number(x.toFixed(3))]))]];
    })),
    binomialOverTreeAt8Targets: jsonFigure(binomialOverTree({ multicast }, TARGET.speedupNodes)),
    worstChainOrBinomialOverIdeal: worst === null || !Number.isFinite(worst) ? null : Number(worst.toFixed(3)),
    firstBlockS: firstBlock,
    kWay: Object.fromEntries(Object.entries(figures.kWay).map(([k, v]) => [k, { s: r2(v.seconds), idealS: r2(v.ideal), ratio: Number((v.seconds / v.ideal).toFixed(3)), pipelinesFormedS: v.pipelinesFormedS.map(r2), gpuS: r2(v.gpuSeconds), perReceiverS: r2(v.perReceiverS), ...(v.k1PerReceiverS === undefined ? {} : { k1PerReceiverS: r2(v.k1PerReceiverS) }) }])),
    heterogeneous: hetero === undefined ? null : { bandwidthFirstCopyS: Number(hetero.bandwidthFirstCopyS.toFixed(3)), insertionFirstCopyS: Number(hetero.insertionFirstCopyS.toFixed(3)) },
    ...(figures.notRun === undefined ? {} : { notRun: figures.notRun }),
    target: TARGET,
    met,
    ...partialFields(SHRUNK),
    ...(error === undefined ? {} : { error }),
  });
}

main().then(
  () => {
    log(lastLine(undefined));
    process.exit(0);
  },
  (err: unknown) => {
    process.stderr.write(`bench:dataplane failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    log(lastLine(err instanceof Error ? err.message : String(err)));
    process.exit(1);
  },
);
