/**
 * The prefill → decode KV transfer of in-process simulated engines (issue 48 items 1–2: the replays and bench:pd run
 * disaggregated SimEngines on one Clock). The contract is engine-sim's (kv-params.ts, vLLM's `kv_transfer_params`):
 * a prefill instance's answer `offer`s the prompt's KV and names where it is held; a decode instance `pull`s it,
 * then prefills only the prompt's last token (`promptTokens − 1` tokens arrive, as vLLM's connector). What engine-sim
 * moves over the native data plane (kv-transfer.ts) is here timed on the clock instead of moved:
 *
 * - Size: the prompt's KV, layers × 2 × KV heads × head size × dtype bytes per token (kv-params.ts kvShape).
 * - Rate: `bitsPerSPerGpu` per GPU and direction, default DEFAULT_KV_BITS_PER_S_PER_GPU — 100 Gbps, the RDMA
 *   between hosts of BlitzScale's Table 1, cluster A, a per-GPU figure (the one live loading uses,
 *   region/liveload/sources.ts) — times the GPUs of the smaller side (a tensor-parallel instance holds its KV in shards,
 *   each GPU sending its own over its own NIC), plus `latencyMs` per transfer.
 * - Queueing, as the data plane runs it (kv-transfer.ts: one send and one receive endpoint per instance, one transfer
 *   at a time each): a transfer starts when the prefill instance's send side and the decode instance's receive side
 *   are both free, in the order pulls are asked, and holds both until it ends.
 * - Held KV: what a prefill answered is held until pulled or `holdMs` passes (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT,
 *   480 s); the prefill engine's own cache frees it at once, as engine-sim's does (its held copy is host memory).
 *   A pull of KV not held ends with upstream_error naming the prefill instance; a pull that would end past
 *   `pullTimeoutMs` ends with timeout at that time; nothing waits longer.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { ObjectReader } from "../../core/validate.js";
import { DEFAULT_KV_HOLD_MS, DEFAULT_KV_PULL_TIMEOUT_MS, kvShape, type KvTransferParams } from "./kv-params.js";

/** 100 Gbps per GPU: BlitzScale Table 1, cluster A, RDMA between hosts. */
export const DEFAULT_KV_BITS_PER_S_PER_GPU = 100e9;
/** `remote_host` of in-process KV: no network address names it. */
export const IN_PROCESS_HOST = "in-process";

export interface KvFabricOptions {
  clock: Clock;
  /** Per GPU and direction; default DEFAULT_KV_BITS_PER_S_PER_GPU. */
  bitsPerSPerGpu?: number;
  /** Added to each transfer (ms); default 0. */
  latencyMs?: number;
  holdMs?: number;
  pullTimeoutMs?: number;
  /** Told of each pull that ended (its time from the ask, ms, its bytes and request) and each that failed: a region's metrics, a bench. */
  observer?: KvTransferObserver;
}

/** What a fabric reports as its pulls end (RegionMetricsSink implements it). */
export interface KvTransferObserver {
  kvPulled(ms: number, bytes: number, requestId: string): void;
  kvPullFailed(): void;
}

/** One pull's outcome: the prompt tokens whose KV arrived, its bytes, and its time from the ask (queueing included). */
export interface KvPulled {
  remoteTokens: number;
  bytes: number;
  ms: number;
}

interface Held {
  engineId: string;
  model: string;
  tp: number;
  promptTokens: number;
  timer: Timer;
}

/** One fabric joins the simulated engines of a fleet: what each holds for decode instances and each side's queue. */
export class KvFabric {
  private readonly held = new Map<string, Held>();
  /** When each instance's send side and receive side are free next (virtual ms). */
  private readonly sendFreeAt = new Map<string, number>();
  private readonly recvFreeAt = new Map<string, number>();
  /** Bytes per ms per GPU of a transfer's smaller side. */
  private readonly bytesPerMsPerGpu: number;
  /** Bytes moved, pulls failed, held KV dropped after holdMs; every pull's time (ms) for a bench's share of TTFT. */
  readonly totals = { bytes: 0, pulls: 0, failed: 0, dropped: 0, pullMs: 0 };

  constructor(private readonly o: KvFabricOptions) {
    const bits = o.bitsPerSPerGpu ?? DEFAULT_KV_BITS_PER_S_PER_GPU;
    if (!(bits > 0)) throw new RangeError(`bitsPerSPerGpu must be > 0, got ${bits}`);
    if (!((o.latencyMs ?? 0) >= 0)) throw new RangeError(`latencyMs must be ≥ 0, got ${o.latencyMs}`);
    this.bytesPerMsPerGpu = bits / 8 / 1000;
  }

  /** After `engineId` prefilled `requestId` for a remote decode: holds its KV and returns the params a decode instance takes. */
  offer(engineId: string, model: string, tp: number, requestId: string, promptTokens: number): KvTransferParams {
    const key = `${engineId}\u0000${requestId}`;
    this.held.get(key)?.timer.cancel();
    const timer = this.o.clock.after(this.o.holdMs ?? DEFAULT_KV_HOLD_MS, () => {
      if (this.held.delete(key)) this.totals.dropped++;
    });
    this.held.set(key, { engineId, model, tp, promptTokens, timer });
    const { blocks } = kvShape(model, promptTokens);
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: engineId,
      remote_host: IN_PROCESS_HOST,
      remote_port: 0,
      remote_block_ids: Array.from({ length: blocks }, (_, b) => b),
      remote_request_id: requestId,
      tp_size: tp,
    };
  }

  /** Requests whose KV is held now. */
  heldCount(): number {
    return this.held.size;
  }

  /**
   * `engineId` (`tp` GPUs) pulls the KV `params` name (a prefill instance's answer, GenerateRequest.kvTransfer.params) for a
   * `promptTokens`-token prompt of `model`: resolves when the transfer ends; rejects with invalid_request for params
   * that do not fit the prompt, upstream_error when the KV is not held, timeout past pullTimeoutMs, or the signal's
   * reason when cancelled.
   */
  pull(engineId: string, model: string, tp: number, params: Readonly<Record<string, unknown>>, promptTokens: number, signal?: AbortSignal): Promise<KvPulled> {
    const clock = this.o.clock;
    const askedMs = clock.now();
    let p: { from: string; requestId: string; blocks: number };
    try {
      p = readParams(params);
    } catch (err) {
      return Promise.reject(err);
    }
    const { bytes, blocks } = kvShape(model, promptTokens);
    if (p.blocks !== blocks) {
      return Promise.reject(new TidegateError("invalid_request", `kv_transfer_params.remote_block_ids: ${p.blocks} blocks, but a ${promptTokens}-token prompt of ${model} has ${blocks}`, { param: "kv_transfer_params" }));
    }
    const key = `${p.from}\u0000${p.requestId}`;
    const h = this.held.get(key);
    if (h === undefined || h.model !== model || h.promptTokens !== promptTokens) {
      this.totals.failed++;
      this.o.observer?.kvPullFailed();
      return Promise.reject(new TidegateError("upstream_error", `prefill instance ${p.from} holds no KV for request ${p.requestId} (never prefilled there, already sent, or dropped after ${this.o.holdMs ?? DEFAULT_KV_HOLD_MS} ms)`));
    }
    const start = Math.max(askedMs, this.sendFreeAt.get(p.from) ?? 0, this.recvFreeAt.get(engineId) ?? 0);
    const end = start + (this.o.latencyMs ?? 0) + bytes / (this.bytesPerMsPerGpu * Math.max(1, Math.min(tp, h.tp)));
    const timeoutMs = this.o.pullTimeoutMs ?? DEFAULT_KV_PULL_TIMEOUT_MS;
    return new Promise<KvPulled>((resolve, reject) => {
      let timer: Timer;
      const onAbort = () => {
        timer.cancel();
        reject(signal!.reason ?? new TidegateError("cancelled", "request cancelled"));
      };
      if (end - askedMs > timeoutMs) {
        timer = clock.after(timeoutMs, () => {
          signal?.removeEventListener("abort", onAbort);
          this.totals.failed++;
          this.o.observer?.kvPullFailed();
          reject(new TidegateError("timeout", `pulling the KV of ${p.requestId} from prefill instance ${p.from} took over ${timeoutMs} ms`));
        });
      } else {
        // The transfer holds both sides until it ends, cancelled or not (its bytes are on the wire).
        this.sendFreeAt.set(p.from, end);
        this.recvFreeAt.set(engineId, end);
        timer = clock.after(end - askedMs, () => {
          signal?.removeEventListener("abort", onAbort);
          h.timer.cancel();
          this.held.delete(key);
          this.totals.bytes += bytes;
          this.totals.pulls++;
          this.totals.pullMs += end - askedMs;
          this.o.observer?.kvPulled(end - askedMs, bytes, p.requestId);
          resolve({ remoteTokens: Math.max(0, promptTokens - 1), bytes, ms: end - askedMs });
        });
      }
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** What a pull needs of the params: the prefill instance, the request and its block count (vLLM's field names). */
function readParams(params: Readonly<Record<string, unknown>>): { from: string; requestId: string; blocks: number } {
  const r = new ObjectReader(params, "kv_transfer_params", "invalid_request");
  if (r.boolean("do_remote_prefill", false) !== true) r.fail("do_remote_prefill", "must be true for a decode from a remote prefill");
  const from = r.string("remote_engine_id");
  const requestId = r.string("remote_request_id");
  const ids = r.array("remote_block_ids", (v, path) => {
    if (!Number.isInteger(v) || (v as number) < 0) throw new TidegateError("invalid_request", `${path}: expected a block id (an integer ≥ 0)`, { param: path });
    return v as number;
  });
  r.allow("do_remote_decode", "remote_host", "remote_port", "tp_size").done();
  return { from, requestId, blocks: ids.length };
}
