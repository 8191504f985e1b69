/**
 * Loads the compiled addon (native/build/Release/tidegate_dataplane.node) and hands it the DataPlaneError class.
 * The path is under the repository root (core/paths.ts `repoRoot`), so it works from source (vitest: native/lib/)
 * and from the compiled tree (dist/native/lib/). A missing build is a clear error that says how to build it.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { repoRoot } from "../../core/paths.js";
import { DataPlaneError } from "../errors.js";

/** The raw shape of the addon's BlockStore (see native/src/store_wrap.h). */
export interface RawBlockStore {
  fillPattern(seed: number | bigint): void;
  loadFile(path: string): void;
  verifyPattern(seed: number | bigint): number;
  has(block: number): boolean;
  checksum(block: number): number;
  presentCount(): number;
  readBlock(block: number): Buffer;
  corruptBlock(block: number): void;
  clear(): void;
  close(): void;
  readonly closed: boolean;
  /** The background prefault of the store's pages has finished (store.h). */
  readonly prefaulted: boolean;
  readonly blockCount: number;
  readonly blockBytes: number;
  readonly totalBytes: number;
}

/** One event from a running role: a verified block arrival, or the end of the run. */
export type RawEvent =
  | { kind: "block"; block: number; from: string; atMs: number; bytes: number }
  | { kind: "done"; error: DataPlaneError | null; bytesSent: number; bytesReceived: number; elapsedMs: number; profile: RunProfile };

/**
 * Where a run's time went (native RunProfile, transport.h). *Ms marks count from the run's start; startMonoMs is
 * CLOCK_MONOTONIC (one clock for every process on a host); firstByteMs and lastByteMs are −1 when nothing arrived.
 */
export interface RunProfile {
  startMonoMs: number;
  /** Connect phase: every peer this node sends to dialed (0 when it sends nothing). */
  dialMs: number;
  firstByteMs: number;
  /** Last payload byte received and its block verified. */
  lastByteMs: number;
  /** Time spent checksumming arriving bytes. */
  checksumMs: number;
  /** recv() calls that returned payload bytes. */
  recvCalls: number;
  /** send()/sendmsg() calls that wrote payload bytes. */
  sendCalls: number;
  /** epoll_wait() calls. */
  waits: number;
}

/** The role a node runs, in the addon's terms: peers by index, sends in order, expected blocks per peer. */
export interface RawRunSpec {
  runId: number;
  self: number;
  peers: { id: string; host: string; port: number }[];
  sends: { peer: number; block: number }[];
  expect: number[][];
  stallMs: number;
  connectMs: number;
  heartbeatMs: number;
  sendMode: "in-order" | "per-peer";
  pull: boolean;
  recvOrder?: { peer: number; block: number }[];
  paceBytesPerS?: number;
}

/** The raw shape of the addon's Endpoint (see native/src/endpoint_wrap.h). */
export interface RawEndpoint {
  start(spec: RawRunSpec, store: RawBlockStore, onEvent: (ev: RawEvent) => void): void;
  cancel(): void;
  close(): void;
  /** What the data port refused since the last call, by reason and remote address ([] once closed). */
  takeRefusals(): { reason: string; peer: string; count: number }[];
  readonly port: number;
  readonly transport: string;
  readonly fallback: string;
  readonly running: boolean;
  readonly closed: boolean;
}

/** Everything the compiled addon exports. */
export interface Addon {
  BlockStore: new (blockCount: number, blockBytes: number, totalBytes: number, memoryLimitBytes: number) => RawBlockStore;
  Endpoint: new (host: string, port: number, transport: string) => RawEndpoint;
  init(errorClass: typeof DataPlaneError): void;
  probeVerbs(): { compiled: boolean; devices: number; detail: string };
  checksum(buf: Buffer): number;
  crc32c(buf: Buffer): number;
  checksumHardware: boolean;
  /** Most payload bytes the TCP transport moves in one send call and in one recv call. */
  tcpCallBytes: { send: number; recv: number };
  measureCosts(bytes: number, blockBytes: number, chunkBytes: number): CostMeasure;
}

/** Per-byte costs of this machine besides the network, in bytes/s (native/src/measure.h). */
export interface CostMeasure {
  /** memcpy between two model-sized memories, chunkBytes per call. */
  memcpyBytesPerS: number;
  /** blockChecksum of cold memory, one block at a time. */
  checksumBytesPerS: number;
  /** The arrival checksum (StreamingChecksum) over each chunk right after it was copied (hot in cache). */
  arrivalChecksumBytesPerS: number;
  /** memcpy of each chunk followed by its arrival checksum: the receive path's user-space work, serialised. */
  copyThenChecksumBytesPerS: number;
}

const ADDON_REL = join("native", "build", "Release", "tidegate_dataplane.node");

let loaded: Addon | undefined;

/** The addon, loaded once per thread (the addon is context-aware: workers get their own instance). */
export function addon(): Addon {
  if (loaded !== undefined) return loaded;
  const path = join(repoRoot(), ADDON_REL);
  if (!existsSync(path)) throw new DataPlaneError("io", `native addon not built: ${path} is missing (run npm run build:native)`);
  const mod = createRequire(import.meta.url)(path) as Addon;
  mod.init(DataPlaneError);
  loaded = mod;
  return mod;
}
