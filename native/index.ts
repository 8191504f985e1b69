/**
 * The native data plane, typed. A BlockStore holds one model as `blockCount` blocks in host memory; an Endpoint is
 * one node's transport (TCP, or verbs where a device exists) with a bound data port, and runs that node's role in
 * a multicast schedule: receive blocks, verify each block's checksum, forward it to the next peers as soon as it
 * arrived. Every block arrival is an event (live scaling can start on the first block). Arguments are checked here
 * (TypeError) and again in C++; failures are DataPlaneError with a `reason`, and the peer and block at fault.
 *
 * Example:
 *   const store = BlockStore.forModel(64 << 20, 16); store.fillPattern(7);
 *   const ep = Endpoint.open({ host: "127.0.0.1" });
 *   const result = await ep.run(role, store, { onBlock: (b) => console.log(b.block, b.atMs) });
 */
import { DataPlaneError } from "./errors.js";
import { addon, type CostMeasure, type RawBlockStore, type RawEndpoint, type RawEvent, type RawRunSpec, type RunProfile } from "./lib/addon.js";

/** The error class every failure of this module is an instance of. */
export { DataPlaneError, isDataPlaneError, type DataPlaneReason } from "./errors.js";

function checkInt(name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
    throw new TypeError(`${name} must be an integer in [${min}, ${max}], got ${String(v)}`);
  return v;
}

/** Options for a new, empty block store. */
export interface BlockStoreOptions {
  blockCount: number;
  blockBytes: number;
  /** Model size; defaults to blockCount × blockBytes. The last block holds the remainder. */
  totalBytes?: number;
  /** Memory this node may use for the model; 0 or absent = physical memory. Over it → DataPlaneError over_memory. */
  memoryLimitBytes?: number;
}

/** One model's bytes as checksummed blocks in page-aligned host memory (λScale §5 packed tensors). */
export class BlockStore {
  /** @internal */ readonly raw: RawBlockStore;

  private constructor(raw: RawBlockStore) {
    this.raw = raw;
  }

  /** An empty store (no block present). Throws DataPlaneError invalid_plan for zero blocks, over_memory if too big. */
  static create(o: BlockStoreOptions): BlockStore {
    if (typeof o !== "object" || o === null) throw new TypeError("BlockStore.create needs an options object");
    const blockCount = checkInt("blockCount", o.blockCount, 0, 1 << 20);
    const blockBytes = checkInt("blockBytes", o.blockBytes, 0);
    const totalBytes = checkInt("totalBytes", o.totalBytes ?? blockCount * blockBytes, 0);
    const limit = checkInt("memoryLimitBytes", o.memoryLimitBytes ?? 0, 0);
    return new BlockStore(new (addon().BlockStore)(blockCount, blockBytes, totalBytes, limit));
  }

  /** An empty store for a model of `totalBytes` cut into `blockCount` blocks of equal size (8-byte aligned). */
  static forModel(totalBytes: number, blockCount: number, memoryLimitBytes = 0): BlockStore {
    checkInt("totalBytes", totalBytes, 1);
    checkInt("blockCount", blockCount, 1, 1 << 20);
    const blockBytes = Math.ceil(totalBytes / blockCount / 8) * 8;
    return BlockStore.create({ blockCount, blockBytes, totalBytes, memoryLimitBytes });
  }

  /** A store holding the packed model file at `path`, every block present and checksummed. */
  static fromFile(path: string, sizeBytes: number, blockCount: number, memoryLimitBytes = 0): BlockStore {
    if (typeof path !== "string" || path === "") throw new TypeError("path must be a non-empty string");
    const s = BlockStore.forModel(sizeBytes, blockCount, memoryLimitBytes);
    s.raw.loadFile(path);
    return s;
  }

  get blockCount(): number {
    return this.raw.blockCount;
  }
  get blockBytes(): number {
    return this.raw.blockBytes;
  }
  get totalBytes(): number {
    return this.raw.totalBytes;
  }
  get closed(): boolean {
    return this.raw.closed;
  }
  /**
   * Whether the store's pages are in memory. A new store maps them at once and prefaults them on a background
   * thread (the creating thread never waits for the kernel); blocks may arrive meanwhile, faulting pages in as they
   * land. `whenPrefaulted()` resolves once they are all in (a closed store counts as done).
   */
  get prefaulted(): boolean {
    return this.raw.prefaulted;
  }
  async whenPrefaulted(pollMs = 2): Promise<void> {
    while (!this.raw.prefaulted) await new Promise((r) => setTimeout(r, pollMs));
  }
  /** Fills every block with the deterministic pattern of `seed` and marks all present (a synthetic model). */
  fillPattern(seed: number): void {
    this.raw.fillPattern(checkInt("seed", seed, 0));
  }
  /** -1 when every byte matches the pattern of `seed`, else the first block that differs. */
  verifyPattern(seed: number): number {
    return this.raw.verifyPattern(checkInt("seed", seed, 0));
  }
  has(block: number): boolean {
    return this.raw.has(this.block(block));
  }
  /** The block's checksum (4-lane CRC32C, native/src/checksum.h); 0 until the block is present. */
  checksum(block: number): number {
    return this.raw.checksum(this.block(block));
  }
  presentCount(): number {
    return this.raw.presentCount();
  }
  /** A copy of the block's bytes. */
  readBlock(block: number): Buffer {
    return this.raw.readBlock(this.block(block));
  }
  /** Test hook: flips one byte of the block without updating its checksum, so the next receiver rejects it. */
  corruptBlock(block: number): void {
    this.raw.corruptBlock(this.block(block));
  }
  /** Marks every block absent (the memory stays). */
  clear(): void {
    this.raw.clear();
  }
  /** Releases the memory once no running transfer uses it. Later calls throw DataPlaneError closed. */
  close(): void {
    this.raw.close();
  }
  private block(b: number): number {
    if (this.raw.closed) throw new DataPlaneError("closed", "the block store is closed");
    return checkInt("block", b, 0, this.raw.blockCount - 1);
  }
}

/** A node's role in a plan, addressed by node index (see nodes/multicast/role.ts roleFor()). */
export interface RoleSpec {
  /** Same number on every node of one transfer; connections from other runs are ignored. */
  runId: number;
  /** Index of this node in `peers`. */
  self: number;
  peers: { id: string; host: string; port: number }[];
  /** Blocks to send, in order; a send waits until its block is present. */
  sends: { peer: number; block: number }[];
  /** expect[p]: the blocks peer p sends here, in its order. */
  expect: number[][];
  /** A peer silent this long has failed (default 1000). */
  stallMs?: number;
  /** Dialing a peer gives up after this long (default 2000). */
  connectMs?: number;
  /** Idle connections carry a heartbeat this often (default 200). */
  heartbeatMs?: number;
  /** "in-order" (default): one send at a time in list order; "per-peer": each peer's sends in order, peers concurrently. */
  sendMode?: "in-order" | "per-peer";
  /**
   * Pull mode (λScale binomial steps): this node asks each sender for one block at a time in `recvOrder`, and sends
   * a block only after its receiver asked for it, so every link carries one block at a time in step order.
   * Every node of a transfer must agree. Default false.
   */
  pull?: boolean;
  /** Pull mode: the (peer, block) pairs this node receives, in step order (default: expect, peer by peer). */
  recvOrder?: { peer: number; block: number }[];
  /**
   * TCP only: this node's sends together go no faster than this many payload bytes/s (each block starts once the
   * bytes before it are due at this rate since the run's loop began; a late block catches up). It emulates a link of
   * this rate where nodes share one host's CPUs. Default 0: unpaced.
   */
  paceBytesPerS?: number;
}

/** A verified block arrival. `atMs` counts from the start of this node's run. */
export interface BlockArrival {
  block: number;
  from: string;
  atMs: number;
  bytes: number;
}

export type { RunProfile } from "./lib/addon.js";

/** What a finished role did: payload bytes sent and received, wall time of the run, every verified arrival, and where the time went. */
export interface RunResult {
  bytesSent: number;
  bytesReceived: number;
  elapsedMs: number;
  arrivals: BlockArrival[];
  profile: RunProfile;
}

/** Per-run hooks: arrival events (on the JS thread, in arrival order) and cancellation. */
export interface RunOptions {
  onBlock?: (arrival: BlockArrival) => void;
  /** Aborting cancels the transfer; run() then rejects with DataPlaneError cancelled. */
  signal?: AbortSignal;
}

/** Which transport an endpoint asks for: "auto" uses verbs where an RDMA device is usable and TCP otherwise. */
export type TransportPreference = "tcp" | "verbs" | "auto";

/** Refusals of one reason from one address at the data port (Endpoint.takeRefusals). */
export interface DataRefusal {
  reason: string;
  peer: string;
  count: number;
}

/** One node's data-plane endpoint: a transport with a bound port, running at most one role at a time. */
export class Endpoint {
  private readonly raw: RawEndpoint;

  private constructor(raw: RawEndpoint) {
    this.raw = raw;
  }

  /**
   * Binds `host:port` (port 0 = any). With transport "auto" and no usable RDMA device the endpoint uses TCP and
   * `log` receives one line saying why (also in `fallback`); with "verbs" and none it throws DataPlaneError
   * unavailable, saying why.
   */
  static open(o: { host: string; port?: number; transport?: TransportPreference; log?: (line: string) => void }): Endpoint {
    if (typeof o !== "object" || o === null || typeof o.host !== "string") throw new TypeError("Endpoint.open needs { host: string }");
    const port = checkInt("port", o.port ?? 0, 0, 65535);
    const pref = o.transport ?? "tcp";
    if (pref !== "tcp" && pref !== "verbs" && pref !== "auto") throw new TypeError(`transport must be tcp, verbs or auto, got ${String(pref)}`);
    const raw = new (addon().Endpoint)(o.host, port, pref);
    if (raw.fallback !== "") (o.log ?? ((l: string) => process.stderr.write(l + "\n")))(`tidegate data plane: ${raw.fallback}`);
    return new Endpoint(raw);
  }

  get port(): number {
    return this.raw.port;
  }
  /** The transport in use: "tcp" or "verbs". */
  get transport(): string {
    return this.raw.transport;
  }
  /** Why the preferred transport was not used ("" when it was). */
  get fallback(): string {
    return this.raw.fallback;
  }
  get running(): boolean {
    return this.raw.running;
  }
  get closed(): boolean {
    return this.raw.closed;
  }

  /**
   * Runs `role` against `store`; resolves when every send and receive finished, rejects with DataPlaneError.
   * Misuse (bad role, closed or busy endpoint, closed store) throws synchronously.
   */
  run(role: RoleSpec, store: BlockStore, opts: RunOptions = {}): Promise<RunResult> {
    if (!(store instanceof BlockStore)) throw new TypeError("run(): store must be a BlockStore");
    if (typeof role !== "object" || role === null) throw new TypeError("run(): role must be an object");
    const spec: RawRunSpec = {
      runId: checkInt("role.runId", role.runId, 0),
      self: checkInt("role.self", role.self, 0),
      peers: role.peers,
      sends: role.sends,
      expect: role.expect,
      stallMs: checkInt("role.stallMs", role.stallMs ?? 1000, 1),
      connectMs: checkInt("role.connectMs", role.connectMs ?? 2000, 1),
      heartbeatMs: checkInt("role.heartbeatMs", role.heartbeatMs ?? 200, 1),
      sendMode: role.sendMode ?? "in-order",
      pull: role.pull ?? false,
      ...(role.recvOrder === undefined ? {} : { recvOrder: role.recvOrder }),
      ...(role.paceBytesPerS === undefined ? {} : { paceBytesPerS: checkInt("role.paceBytesPerS", role.paceBytesPerS, 0) }),
    };
    if (spec.sendMode !== "in-order" && spec.sendMode !== "per-peer") throw new TypeError(`role.sendMode must be in-order or per-peer, got ${String(spec.sendMode)}`);
    if (opts.signal?.aborted) return Promise.reject(new DataPlaneError("cancelled", "transfer cancelled before it started"));
    const arrivals: BlockArrival[] = [];
    let settle: { resolve: (r: RunResult) => void; reject: (e: Error) => void } | undefined;
    const done = new Promise<RunResult>((resolve, reject) => {
      settle = { resolve, reject };
    });
    const onAbort = () => this.raw.cancel();
    // start() throws synchronously (TypeError, DataPlaneError closed/busy/invalid_plan) before anything runs.
    this.raw.start(spec, store.raw, (ev: RawEvent) => {
      if (ev.kind === "block") {
        const a: BlockArrival = { block: ev.block, from: ev.from, atMs: ev.atMs, bytes: ev.bytes };
        arrivals.push(a);
        opts.onBlock?.(a);
        return;
      }
      opts.signal?.removeEventListener("abort", onAbort);
      if (ev.error !== null) settle!.reject(ev.error);
      else settle!.resolve({ bytesSent: ev.bytesSent, bytesReceived: ev.bytesReceived, elapsedMs: ev.elapsedMs, arrivals, profile: ev.profile });
    });
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    return done;
  }

  /**
   * What the data port refused since the last call, aggregated by reason and remote address (no port): garbage or
   * a foreign protocol (`bad_magic`), a malformed or truncated first header (`bad_handshake`), no first header in
   * time (`handshake_timeout`), a frame longer than it may be (`frame_too_large`), a malformed frame from a peer of
   * the running role (`bad_frame`), more connections held than allowed (`too_many_connections`); native/README.md
   * "Boundary refusals". [] once closed. The caller reports them (core/boundary.ts).
   */
  takeRefusals(): DataRefusal[] {
    return this.raw.takeRefusals();
  }

  /** Cancels the running role, if any (run() rejects with reason "cancelled"). */
  cancel(): void {
    this.raw.cancel();
  }
  /** Closes the port. Throws DataPlaneError busy while a role runs; later calls throw DataPlaneError closed. */
  close(): void {
    this.raw.close();
  }
}

/** Whether the verbs transport is compiled into this build and how many RDMA devices the machine has. */
export function probeVerbs(): { compiled: boolean; devices: number; detail: string } {
  return addon().probeVerbs();
}

/**
 * Microbenchmarks of what a transfer pays per byte besides the network (bench:dataplane's profile): memcpy, the
 * block checksum, the arrival checksum over hot bytes. Blocks the calling thread for about 5·bytes / memory
 * bandwidth; allocates 2 × bytes (DataPlaneError over_memory when it cannot).
 */
export function measureCosts(bytes: number, blockBytes: number, chunkBytes: number): CostMeasure {
  checkInt("bytes", bytes, 8);
  checkInt("blockBytes", blockBytes, 8);
  checkInt("chunkBytes", chunkBytes, 1);
  return addon().measureCosts(bytes, blockBytes, chunkBytes);
}
export type { CostMeasure } from "./lib/addon.js";

/** Most payload bytes the TCP transport moves in one send call and in one recv call (the bench's raw pair uses the same). */
export function tcpCallBytes(): { send: number; recv: number } {
  const c = addon().tcpCallBytes;
  return { send: c.send, recv: c.recv };
}

/** The block checksum of `buf` (4-lane CRC32C), and plain CRC32C, for tests and tools. */
export function blockChecksum(buf: Buffer): number {
  if (!Buffer.isBuffer(buf)) throw new TypeError("blockChecksum needs a Buffer");
  return addon().checksum(buf);
}
/** Plain CRC32C (Castagnoli) of `buf`; crc32c("123456789") = 0xe3069283. */
export function crc32c(buf: Buffer): number {
  if (!Buffer.isBuffer(buf)) throw new TypeError("crc32c needs a Buffer");
  return addon().crc32c(buf);
}
