/**
 * The verbs transport, tested for real: boots softroce-vm (a QEMU VM with a soft-RoCE device) and runs the verbs
 * suite (test/native/vm/verbs.vmtest.ts) inside it with vitest. Skipped, with the reason, where the VM cannot run
 * (no tool, not root to install QEMU, an addon built without libibverbs).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { runInVm, vmUnavailable, type VmRun } from "./vm/softroce.js";

// Cases that must be in the VM run and pass (a case that vanished from the suite fails here).
const REQUIRED = [
  "rxe0 is an RDMA device and the addon has the verbs transport",
  "transport conformance: verbs > chain: every target ends with every byte of the model, each block verified once",
  "transport conformance: verbs > binomial 1→8: every target ends with every byte of the model, each block verified once",
  "transport conformance: verbs > a corrupted block is rejected by the receiver, naming the block and the sender",
  "transport conformance: verbs > a stalled peer fails the transfer within about 1 s, naming it",
  "a sender that writes more than the block",
  "a sender that names a block id the model does not have",
  "a sender whose memory key does not match the receiver's region",
  "a block corrupted in the receiver's memory after the write, before the checksum, is rejected",
  "a receiver that never posts a receive",
  "every queue pair, completion queue and memory region goes with its run, the protection domain and context with the endpoint",
  "every agent runs the verbs transport (Info and the ready line say so); --transport auto picks verbs here",
  "point to point: every target holds the exact model",
  "chain s→a→b→c: every target holds the exact model",
  "binomial 1→3 (pull, λScale steps): every target holds the exact model",
  "a peer killed mid-transfer fails its neighbours within 1 s, naming it",
  "an agent that writes more than a block",
];

const why = vmUnavailable();

describe("verbs transport on soft-RoCE inside a VM (softroce-vm)", () => {
  if (why !== undefined) {
    it.skip(`verbs suite not run: ${why}`, () => undefined);
    return;
  }
  let run: VmRun;
  beforeAll(async () => {
    run = await runInVm({ command: "CI=true NO_COLOR=1 node node_modules/vitest/vitest.mjs run --config test/native/vm/vitest.config.ts", memMiB: 3072, timeoutS: 1500 });
    const summary = /^\d+ passed, \d+ failed.*$/m.exec(run.output);
    process.stdout.write(`verbs suite inside softroce-vm: ${summary?.[0] ?? "no summary line"} (exit ${run.code})\n`);
  }, 30 * 60_000);

  it("the suite inside the VM ends with its own summary line: every test passed, none skipped", () => {
    const tail = run.output.split("\n").slice(-80).join("\n");
    const m = /^(\d+) passed, (\d+) failed(, (\d+) skipped)?$/m.exec(run.output);
    expect(m, tail).not.toBeNull();
    expect(Number(m![2]), tail).toBe(0);
    expect(m![3], tail).toBeUndefined();
    expect(Number(m![1]), tail).toBeGreaterThanOrEqual(REQUIRED.length);
    expect(run.code, tail).toBe(0);
  });

  it("every required verbs case ran in the VM and passed", () => {
    const passed = run.output.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "").split("\n").filter((l) => /✓/.test(l));
    for (const title of REQUIRED) expect(passed.some((l) => l.includes(title)), `${title}\n${passed.join("\n")}`).toBe(true);
  });
});
