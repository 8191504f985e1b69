/**
 * The part of bench:verbs that runs inside softroce-vm (test/bench/verbs.ts starts it there). Everything on the one
 * soft-RoCE device rxe0 of the VM, in the same VM run, alternating A B C per round:
 *   A. `ib_write_bw` (perftest) moving VERBS_BYTES in messages of the size tidegate's writes have (the device's
 *      largest message, 8 MiB on rxe), its reported average bandwidth;
 *   B. tidegate's verbs transport point to point: VERBS_BYTES in VERBS_BLOCKS blocks between two endpoints, timed
 *      from the sender starting (dial, handshake, memory registration included) to the receiver holding the last
 *      block verified;
 *   C. tidegate's TCP transport, the same transfer over loopback TCP.
 * Then a 1 → 4 chain of VERBS_BYTES in VERBS_BLOCKS blocks over verbs against its ideal at the measured point-to-
 * point rate (nodes/multicast/ideal.ts: M/B + (N − 2)·(M/b)/B with N = 5 nodes), and, to show what bounds it,
 * four disjoint point-to-point transfers at once (the VM's aggregate RDMA rate: every hop of the chain shares the
 * VM's two emulated cores with soft-RoCE's packet work).
 * Prints progress lines and, last, `VERBS-VM-RESULT <json>`.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { Endpoint, type RunResult, type TransportPreference } from "../../native/index.js";
import { planUnicast } from "../../nodes/multicast/baselines.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import { idealSeconds } from "../../nodes/multicast/ideal.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { validatePlan } from "../../nodes/multicast/validate.js";
import { localCluster, runAll } from "../native/harness.js";
import { median } from "./common.js";

const MiB = 1 << 20;
const env = (k: string, d: number) => (process.env[k] === undefined ? d : Number(process.env[k]));
const BYTES = env("VERBS_BYTES", 256 * MiB);
const BLOCKS = env("VERBS_BLOCKS", 16);
const ROUNDS = env("VERBS_ROUNDS", 3);
// Soft-RoCE does its packet work on the VM's two emulated cores; with four hops busy a node's thread can wait over
// a second for a core. The bench measures throughput; the 1 s failure detection is what the verbs suite proves.
const STALL_MS = env("VERBS_STALL_MS", 10_000);
const log = (s: string) => process.stdout.write(s + "\n");

/** The GID index of rxe0's IPv4 RoCE v2 address (what the transport picks; ib_write_bw needs it as -x). */
function roceV2GidIndex(): number {
  const dir = "/sys/class/infiniband/rxe0/ports/1";
  for (const i of readdirSync(`${dir}/gids`).map(Number).sort((a, b) => a - b)) {
    const gid = readFileSync(`${dir}/gids/${i}`, "utf8").trim();
    let type = "";
    try {
      type = readFileSync(`${dir}/gid_attrs/types/${i}`, "utf8").trim();
    } catch {
      continue;
    }
    if (gid.startsWith("0000:0000:0000:0000:0000:ffff:") && /v2/i.test(type)) return i;
  }
  throw new Error("rxe0 has no IPv4 RoCE v2 GID");
}

function run(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d: Buffer) => (out += d.toString()));
    p.stderr.on("data", (d: Buffer) => (out += d.toString()));
    p.on("close", (code) => resolve({ code: code ?? 1, out }));
  });
}

/** ib_write_bw server and client on rxe0; its average bandwidth in bytes/s. */
async function ibWriteBw(gid: number, msgBytes: number): Promise<number> {
  const iters = Math.max(5, Math.round(BYTES / msgBytes));
  const common = ["-d", "rxe0", "-x", String(gid), "-s", String(msgBytes), "-n", String(iters), "--report_gbits", "-F"];
  const server = run("ib_write_bw", common);
  await new Promise((r) => setTimeout(r, 1500));
  const client = await run("ib_write_bw", [...common, "127.0.0.1"]);
  await server;
  // #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]
  const m = new RegExp(`^\\s*${msgBytes}\\s+${iters}\\s+([\\d.]+)\\s+([\\d.]+)`, "m").exec(client.out);
  if (m === null) throw new Error(`ib_write_bw printed no result (exit ${client.code}):\n${client.out}`);
  return (Number(m[2]) * 1e9) / 8;
}

/** Runs every node of `plan` on its own endpoint in this process (test/native/harness.ts); the transfer's time. */
async function transfer(plan: MulticastPlan, transport: TransportPreference, runId: number): Promise<{ ms: number }> {
  const c = localCluster(plan, 3, transport);
  try {
    const res = await runAll(c, plan, runId, { stallMs: STALL_MS });
    const results = new Map<string, RunResult>();
    for (const [n, r] of res) {
      if (r instanceof Error) throw r;
      results.set(n, r);
    }
    for (const t of plan.targets) if (c.stores.get(t)!.verifyPattern(3) !== -1) throw new Error(`${t} does not hold the model after the transfer`);
    // From the first sender's start to the last receiver's last verified block, on one monotonic clock.
    const start = Math.min(...plan.sources.map((s) => results.get(s)!.profile.startMonoMs));
    const end = Math.max(...plan.targets.map((t) => results.get(t)!.profile.startMonoMs + results.get(t)!.profile.lastByteMs));
    return { ms: end - start };
  } finally {
    c.close();
  }
}

async function main(): Promise<void> {
  const gid = roceV2GidIndex();
  const probe = Endpoint.open({ host: "127.0.0.1", transport: "verbs", log });
  probe.close();
  const mtu = /active_mtu:\s*(\d+)/.exec((await run("ibv_devinfo", ["-d", "rxe0"])).out)?.[1] ?? "?";
  const blockBytes = Math.ceil(BYTES / BLOCKS);
  const msgBytes = Math.min(blockBytes, 8 * MiB);
  log(`inside the VM: rxe0, GID index ${gid}, active MTU ${mtu}; ${BYTES / MiB} MiB in ${BLOCKS} blocks, ${ROUNDS} rounds; ib_write_bw messages of ${msgBytes} bytes`);
  const p2p = validatePlan(planUnicast({ model: { totalBytes: BYTES, blockCount: BLOCKS }, source: "s", targets: ["t"] }));
  const rounds: { ibWriteBw: number; verbs: number; tcp: number }[] = [];
  let runId = 1;
  for (let r = 0; r < ROUNDS; r++) {
    const ib = await ibWriteBw(gid, msgBytes);
    const v = await transfer(p2p, "verbs", runId++);
    const t = await transfer(p2p, "tcp", runId++);
    const round = { ibWriteBw: ib, verbs: (BYTES / v.ms) * 1000, tcp: (BYTES / t.ms) * 1000 };
    rounds.push(round);
    log(`round ${r + 1}: ib_write_bw ${((round.ibWriteBw * 8) / 1e9).toFixed(3)} Gbit/s, tidegate verbs ${((round.verbs * 8) / 1e9).toFixed(3)} Gbit/s (${v.ms.toFixed(0)} ms), tidegate tcp ${((round.tcp * 8) / 1e9).toFixed(3)} Gbit/s (${t.ms.toFixed(0)} ms); verbs/ib_write_bw ${(round.verbs / round.ibWriteBw).toFixed(3)}`);
  }
  const verbsRate = median(rounds.map((x) => x.verbs));
  const chainPlan = validatePlan(planChains({ model: { totalBytes: BYTES, blockCount: BLOCKS }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a", "b", "c", "d"].map((id) => ({ id, inBytesPerS: 1 })) }));
  const chain = await transfer(chainPlan, "verbs", runId++);
  const idealMs = idealSeconds("chain", { totalBytes: BYTES, blockCount: BLOCKS, nodes: 5, linkBytesPerS: verbsRate }) * 1000;
  log(`chain 1→4: ${chain.ms.toFixed(0)} ms, ideal at ${((verbsRate * 8) / 1e9).toFixed(3)} Gbit/s ${idealMs.toFixed(0)} ms: ${(chain.ms / idealMs).toFixed(3)}× ideal`);
  // Four disjoint pairs at once, each moving the whole model as each hop of the chain does: their aggregate rate
  // bounds any four concurrent hops in this VM.
  const pairs = await Promise.all(
    [0, 1, 2, 3].map((i) => transfer(validatePlan(planUnicast({ model: { totalBytes: BYTES, blockCount: BLOCKS }, source: `s${i}`, targets: [`t${i}`] })), "verbs", 1000 + i)),
  );
  const pairsMs = Math.max(...pairs.map((p) => p.ms));
  const aggregate = (4 * BYTES) / pairsMs * 1000;
  log(`4 disjoint point-to-point transfers at once: ${pairsMs.toFixed(0)} ms, aggregate ${((aggregate * 8) / 1e9).toFixed(3)} Gbit/s (${(aggregate / verbsRate).toFixed(2)}× one transfer)`);
  const result = {
    mtu: Number(mtu),
    gidIndex: gid,
    rounds: rounds.map((x) => ({ ibWriteBwGbps: (x.ibWriteBw * 8) / 1e9, verbsGbps: (x.verbs * 8) / 1e9, tcpGbps: (x.tcp * 8) / 1e9, verbsVsIbWriteBw: x.verbs / x.ibWriteBw })),
    ibWriteBwGbps: (median(rounds.map((x) => x.ibWriteBw)) * 8) / 1e9,
    verbsGbps: (verbsRate * 8) / 1e9,
    tcpGbps: (median(rounds.map((x) => x.tcp)) * 8) / 1e9,
    verbsVsIbWriteBw: median(rounds.map((x) => x.verbs / x.ibWriteBw)),
    chain: { ms: chain.ms, idealMs, overIdeal: chain.ms / idealMs },
    fourPairs: { ms: pairsMs, aggregateGbps: (aggregate * 8) / 1e9, overOneTransfer: aggregate / verbsRate, chainLowerBoundMs: ((4 * BYTES) / aggregate) * 1000 },
  };
  log(`VERBS-VM-RESULT ${JSON.stringify(result)}`);
}

main().catch((e: unknown) => {
  log(`VERBS-VM-ERROR ${JSON.stringify(String(e instanceof Error ? (e.stack ?? e.message) : e))}`);
  process.exitCode = 1;
});
