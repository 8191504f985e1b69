import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { BlockStore, blockChecksum, crc32c, Endpoint, isDataPlaneError, probeVerbs } from "../../native/index.js";
import { repoRoot } from "../../core/paths.js";
import { addon } from "../../native/lib/addon.js";
import { spawnAgent, stopAgents } from "../netns/agents.js";

describe("native boundary: argument checks on both sides, typed errors, use after close", () => {
  it("the TS wrapper rejects bad arguments with TypeError", () => {
    expect(() => BlockStore.create({ blockCount: 1.5, blockBytes: 8 })).toThrow(TypeError);
    expect(() => BlockStore.forModel(-1, 2)).toThrow(TypeError);
    const s = BlockStore.forModel(64, 2);
    expect(() => s.has(2)).toThrow(TypeError);
    expect(() => s.fillPattern(-3)).toThrow(TypeError);
    expect(() => Endpoint.open({ host: "127.0.0.1", port: 70000 })).toThrow(TypeError);
    s.close();
  });

  it("the addon itself rejects bad arguments with TypeError instead of crashing", () => {
    const raw = addon();
    expect(() => new raw.BlockStore(2, 8, 16, "x" as unknown as number)).toThrow(TypeError);
    expect(() => new raw.BlockStore(2, 8, 100, 0)).toThrow(/does not fill/);
    const store = new raw.BlockStore(2, 8, 16, 0);
    expect(() => store.has(-1)).toThrow(TypeError);
    expect(() => store.readBlock(Number.NaN)).toThrow(TypeError);
    const ep = new raw.Endpoint("127.0.0.1", 0, "tcp");
    const spec = { runId: 1, self: 0, peers: [{ id: "a", host: "127.0.0.1", port: 1 }], sends: [], expect: [[]], stallMs: 1000, connectMs: 100, heartbeatMs: 100, sendMode: "in-order" as const, pull: false };
    expect(() => ep.start(spec, {} as never, () => undefined)).toThrow(/must be a BlockStore/);
    expect(() => ep.start({ ...spec, self: 3 }, store, () => undefined)).toThrow(TypeError);
    expect(() => ep.start({ ...spec, sends: [{ peer: 0, block: 0 }] }, store, () => undefined)).toThrow(/this node itself/);
    expect(() => ep.start({ ...spec, expect: [] }, store, () => undefined)).toThrow(/one entry per peer/);
    expect(() => ep.start({ ...spec, heartbeatMs: 5000 }, store, () => undefined)).toThrow(/heartbeatMs/);
    expect(() => ep.start(spec, store, 5 as never)).toThrow(TypeError);
    expect(() => ep.start({ ...spec, recvOrder: [{ peer: 0, block: 1 }] }, store, () => undefined)).toThrow(/recvOrder must list exactly/);
    expect(() => ep.start({ ...spec, pull: "yes" as never }, store, () => undefined)).toThrow(TypeError);
    expect(() => raw.checksum("abc" as never)).toThrow(TypeError);
    expect(ep.running).toBe(false);
    ep.close();
    store.close();
  });

  it("zero blocks and a model over memory are DataPlaneErrors", () => {
    let err: unknown;
    try {
      BlockStore.create({ blockCount: 0, blockBytes: 8, totalBytes: 0 });
    } catch (e) {
      err = e;
    }
    expect(isDataPlaneError(err, "invalid_plan")).toBe(true);
    err = undefined;
    try {
      BlockStore.create({ blockCount: 4, blockBytes: 1 << 20, memoryLimitBytes: 1 << 20 });
    } catch (e) {
      err = e;
    }
    expect(isDataPlaneError(err, "over_memory"), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/does not fit in 1048576 bytes of memory/);
  });

  it("use after close throws DataPlaneError closed, for stores and endpoints", () => {
    const s = BlockStore.forModel(1024, 4);
    s.fillPattern(1);
    s.close();
    expect(s.closed).toBe(true);
    for (const f of [() => s.has(0), () => s.readBlock(1), () => s.fillPattern(2), () => s.presentCount(), () => s.blockCount]) {
      let err: unknown;
      try {
        f();
      } catch (e) {
        err = e;
      }
      expect(isDataPlaneError(err, "closed"), String(err)).toBe(true);
    }
    const ep = Endpoint.open({ host: "127.0.0.1" });
    ep.close();
    expect(() => ep.port).toThrow(/closed/);
    const store = BlockStore.forModel(1024, 1);
    expect(() => ep.run({ runId: 1, self: 0, peers: [{ id: "a", host: "h", port: 1 }], sends: [], expect: [[]] }, store)).toThrow(/closed/);
    store.close();
  });

  it("checksums: CRC32C matches its check value, the block checksum sees a flipped bit, stores checksum what they hold", () => {
    expect(crc32c(Buffer.from("123456789"))).toBe(0xe3069283); // the CRC-32C check value
    const buf = Buffer.alloc(1 << 16, 0);
    for (let i = 0; i < buf.length; i++) buf[i] = (i * 2654435761) >>> 24;
    const a = blockChecksum(buf);
    buf.writeUInt8(buf.readUInt8(777) ^ 1, 777);
    expect(blockChecksum(buf)).not.toBe(a);
    // store checksum == checksum of the bytes
    const s = BlockStore.forModel(3 * 4096 + 5, 3);
    s.fillPattern(11);
    for (let b = 0; b < 3; b++) expect(s.checksum(b)).toBe(blockChecksum(s.readBlock(b)));
    s.close();
  });

  it("checksums: CRC32C and the 4-lane block checksum match a bitwise reference at every length class and alignment", () => {
    // Lengths cross the native paths: carry-less folding in 256-byte steps (≥ 512 bytes, where AVX-512 VPCLMULQDQ
    // exists) or else three crc32 chains joined by shift tables (≥ 768 bytes), and one crc32 chain for the rest,
    // with odd tails. A machine runs one of the two long paths; the other was checked against this reference too.
    const table = new Uint32Array(256).map((_, i) => {
      let c = i;
      for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
      return c >>> 0;
    });
    const ref = (b: Buffer, crc = 0): number => {
      let c = ~crc >>> 0;
      for (const x of b) c = (table[(c ^ x) & 0xff]! ^ (c >>> 8)) >>> 0;
      return ~c >>> 0;
    };
    const refBlock = (b: Buffer): number => {
      const seg = Math.floor(b.length / 4) & ~7;
      const lanes = Buffer.alloc(16);
      for (let i = 0; i < 4; i++) lanes.writeUInt32LE(ref(b.subarray(i * seg, (i + 1) * seg)), 4 * i);
      return ref(b.subarray(4 * seg), ref(lanes));
    };
    const big = Buffer.alloc(120_000 + 64);
    for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761 + (i >>> 7)) >>> 24;
    for (const len of [0, 1, 7, 8, 255, 256, 511, 512, 513, 767, 768, 769, 1000, 24_575, 24_576, 24_577, 49_999, 120_000])
      for (const off of [0, 1, 3, 8, 61]) {
        const b = big.subarray(off, off + len);
        expect(crc32c(b)).toBe(ref(b));
        expect(blockChecksum(b)).toBe(refBlock(b));
      }
  });

  it("worker threads: the addon loads per thread, and a worker killed mid-transfer is cleaned up", async () => {
    const url = new URL("./worker-run.js", import.meta.url);
    const w = new Worker(fileURLToPath(url).replace(/\/test\/native\//, "/dist/test/native/"), { workerData: { bytes: 256 << 20 } });
    const first = await new Promise<string>((resolve, reject) => {
      w.once("message", (m: string) => resolve(m));
      w.once("error", reject);
    });
    expect(first).toBe("started");
    const code = await w.terminate();
    expect(code).toBe(1);
    // this thread's addon still works after the worker's cleanup hooks ran
    const s = BlockStore.forModel(4096, 2);
    s.fillPattern(3);
    expect(s.verifyPattern(3)).toBe(-1);
    s.close();
  });
});

describe("verbs transport selection", () => {
  // The verbs transport compiles only where libibverbs headers existed when the addon was built (README: optional).
  // Its data path runs in test/native/verbs-vm.test.ts (soft-RoCE inside a VM). Here: what a node without a usable
  // device does, checked only on such a node; a node with a device checks that auto picks verbs.
  const probe = probeVerbs();
  const noDevice = `skipped: this machine has an RDMA device (${probe.detail})`;
  const withDevice = `skipped: no RDMA device here (${probe.detail}); the soft-RoCE VM suite covers it`;
  it.skipIf(!probe.compiled)(`is compiled in and links libibverbs (skipped when the addon was built without libibverbs-dev: ${probe.compiled ? "present" : "absent here"})`, () => {
    // the compiled addon links libibverbs: the verbs code is really in it
    const ldd = spawnSync("ldd", [fileURLToPath(new URL("../../native/build/Release/tidegate_dataplane.node", import.meta.url)).replace("/dist/", "/")], { encoding: "utf8" });
    expect(ldd.stdout).toMatch(/libibverbs\.so/);
  });
  it.skipIf(probe.devices > 0)(`"auto" without an RDMA device uses TCP and says why in one line${probe.devices > 0 ? ` (${noDevice})` : ""}`, () => {
    const lines: string[] = [];
    const ep = Endpoint.open({ host: "127.0.0.1", transport: "auto", log: (l) => lines.push(l) });
    expect(ep.transport).toBe("tcp");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^tidegate data plane: verbs transport unavailable \(.+\); using TCP$/);
    if (probe.compiled) expect(lines[0]).toContain("(compiled in; no RDMA device found)");
    expect(ep.fallback).toBe(lines[0]!.replace("tidegate data plane: ", ""));
    ep.close();
  });
  it.skipIf(probe.devices > 0)(`an agent started with --transport auto and no RDMA device says on its ready line that it runs TCP, and why${probe.devices > 0 ? ` (${noDevice})` : ""}`, async () => {
    const a = await spawnAgent({ nodeId: "auto", host: "127.0.0.1", transport: "auto" });
    try {
      expect(a.readyLine).toMatch(/ transport tcp \(verbs transport unavailable \(.+\); using TCP\) metrics /);
    } finally {
      await stopAgents([a]);
    }
  });
  it.skipIf(probe.devices > 0)(`"verbs" without an RDMA device is an error saying why, not a silent TCP${probe.devices > 0 ? ` (${noDevice})` : ""}`, () => {
    const err = (() => {
      try {
        Endpoint.open({ host: "127.0.0.1", transport: "verbs", log: () => undefined });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(isDataPlaneError(err, "unavailable"), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/^the verbs transport was asked for but cannot run here: /);
    // and the agent refuses to start with it, naming the flag's problem on stderr
    const cli = join(repoRoot(), "dist", "bin", "tidegate.js");
    const r = spawnSync(process.execPath, [cli, "agent", "--node-id", "v", "--transport", "verbs", "--data-host", "127.0.0.1", "--grpc-host", "127.0.0.1", "--grpc-port", "0", "--metrics-port", "0"], { encoding: "utf8", timeout: 30_000 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/the verbs transport was asked for but cannot run here/);
  });
  it.skipIf(probe.devices === 0)(`"auto" picks verbs where a device exists${probe.devices === 0 ? ` (${withDevice})` : ""}`, () => {
    const ep = Endpoint.open({ host: "127.0.0.1", transport: "auto", log: () => undefined });
    expect(ep.transport).toBe("verbs");
    expect(ep.fallback).toBe("");
    ep.close();
  });

  it("a new store prefaults its pages in the background: whenPrefaulted resolves, blocks may land meanwhile, a closed store counts as done", async () => {
    const s = BlockStore.forModel(64 << 20, 16);
    // Writing while the prefault runs (MADV_POPULATE_WRITE never changes a byte): the pattern must survive it.
    s.fillPattern(5);
    await s.whenPrefaulted();
    expect(s.prefaulted).toBe(true);
    expect(s.verifyPattern(5)).toBe(-1);
    s.close();
    expect(s.prefaulted).toBe(true);
    await s.whenPrefaulted();
    // Closing while the prefault still runs stops it (the destructor joins it within one 8 MiB step).
    const t = BlockStore.forModel(256 << 20, 16);
    t.close();
    expect(t.prefaulted).toBe(true);
  });
});
