/**
 * bench:verbs — tidegate's RDMA verbs transport, inside softroce-vm (a QEMU VM with a soft-RoCE device; no RDMA NIC
 * exists here), against `ib_write_bw` from Debian's perftest on the same device in the same VM run, and against
 * tidegate's own TCP transport there. The in-VM part is test/bench/verbs-vm.ts (what each arm moves and how it is
 * timed). Targets: verbs ≥ 0.8 × ib_write_bw point to point; a 1 → 4 chain of 256 MiB in 16 blocks within 1.15×
 * its ideal at the measured point-to-point rate.
 *
 * Inputs (environment): VERBS_BYTES (256 MiB), VERBS_BLOCKS (16), VERBS_ROUNDS (3), VERBS_STALL_MS (10000),
 * TIDEGATE_SOFTROCE_VM (the tool; default ../shared/tools/softroce-vm). The last line is one JSON object; it says
 * met: false, with the error, when the VM cannot run or the run fails.
 */
import { cpus, loadavg, release, totalmem } from "node:os";
import { commandPath, runInVm, softroceTool, vmUnavailable } from "../native/vm/softroce.js";
import { atLeast, atMost, partialFields } from "./verdicts/common.js";

const TARGET = { verbsVsIbWriteBw: 0.8, chainOverIdealMax: 1.15 };
const passEnv = ["VERBS_BYTES", "VERBS_BLOCKS", "VERBS_ROUNDS", "VERBS_STALL_MS"].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]!}`);

async function main(): Promise<void> {
  process.stdout.write(`bench:verbs on ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Linux ${release()}, node ${process.version}, load ${loadavg()[0]!.toFixed(2)}\n`);
  process.stdout.write(`the VM: ${softroceTool()} (QEMU TCG, 2 emulated cores, soft-RoCE rxe0 on a veth pair, MTU 9000)\n`);
  const why = vmUnavailable();
  if (why !== undefined) throw new Error(`the VM cannot run here: ${why}`);
  const ib = commandPath("ib_write_bw");
  if (ib === undefined) throw new Error("ib_write_bw not found: install Debian's perftest package");
  const run = await runInVm({ command: `${passEnv.join(" ")} node dist/test/bench/verbs-vm.js`, memMiB: 6144, timeoutS: 1200, extra: [ib], onLine: (l) => process.stdout.write(`  vm | ${l}\n`) });
  const err = /^VERBS-VM-ERROR (.*)$/m.exec(run.output);
  if (err !== null) throw new Error(`inside the VM: ${JSON.parse(err[1]!) as string}`);
  const res = /^VERBS-VM-RESULT (.*)$/m.exec(run.output);
  if (res === null) throw new Error(`the VM run printed no result (exit ${run.code})`);
  const r = JSON.parse(res[1]!) as { verbsVsIbWriteBw: number; chain: { overIdeal: number } } & Record<string, unknown>;
  // A run with any VERBS_* setting moves other bytes or rounds than the target is for: partial (met false).
  const met = atLeast(r.verbsVsIbWriteBw, TARGET.verbsVsIbWriteBw) && atMost(r.chain.overIdeal, TARGET.chainOverIdealMax) && passEnv.length === 0;
  process.stdout.write(JSON.stringify({ bench: "verbs", ...r, target: TARGET, met, ...partialFields(passEnv) }) + "\n");
}

main().catch((e: unknown) => {
  process.stdout.write(JSON.stringify({ bench: "verbs", target: TARGET, met: false, error: e instanceof Error ? e.message : String(e) }) + "\n");
});
