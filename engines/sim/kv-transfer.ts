/**
 * engine-sim's prefill → decode KV transfer (issue 48 item 1), with vLLM's disaggregation contract (NixlConnector;
 * its `toy_proxy_server.py` in tests/v1/kv_connector/nixl_integration/):
 *
 * 1. The proxy sends the request to a prefill instance with `kv_transfer_params: {"do_remote_decode": true}`,
 *    `max_tokens: 1`, not streamed. The prefill instance runs it, keeps the prompt's KV and answers with
 *    `kv_transfer_params: {do_remote_prefill: true, do_remote_decode: false, remote_engine_id, remote_host,
 *    remote_port, remote_block_ids, remote_request_id, tp_size}` — where the KV is and how to ask for it (`offer`).
 * 2. The proxy sends the same request with those params to a decode instance, which pulls the KV (`pull`) and
 *    decodes without computing the prompt: like vLLM's connector it computes the prompt's last token itself, so
 *    `promptTokens − 1` tokens arrive (`remoteTokens`).
 *
 * The bytes move for real through the native data plane (native/index.ts Endpoint, TCP): the prompt's KV is
 * layers × 2 × KV heads × head size × dtype bytes per token (core/models.ts kvBytesPerToken), cut into blocks of
 * KV_BLOCK_TOKENS tokens (vLLM's default block size); the prefill instance holds them in a BlockStore filled with the
 * request's pattern, and the decode instance checks every byte against it after the transfer. `remote_host` and
 * `remote_port` name the prefill instance's HTTP side channel (NIXL's side channel is its own socket): the decode
 * instance posts `{remote_request_id, host, port, run_id}` to KV_SEND_PATH there, naming its receiving data port,
 * and the prefill instance sends the blocks to it. Each instance has one endpoint for sends and one for receives,
 * each running one transfer at a time (the native Endpoint's rule), so transfers to or from one instance queue.
 *
 * The prefill instance's engine frees the request's KV when it finishes (the simulated cache does not hold it); the
 * held copy is this module's store, freed once sent or after `holdMs` (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s
 * by default), and bounded by `maxHeldBytes` (4 GiB; the oldest goes first). A pull that fails or passes `pullTimeoutMs` ends the decode request with an error naming the prefill
 * instance; nothing waits past it.
 */
import { TidegateError, toTidegateError } from "../../core/errors.js";
import { ObjectReader } from "../../core/validate.js";
import { BlockStore, Endpoint } from "../../native/index.js";
import { DEFAULT_KV_HOLD_MS, DEFAULT_KV_PULL_TIMEOUT_MS, KV_BLOCK_TOKENS, kvShape, type KvTransferParams } from "./kv-params.js";

/** The prefill instance's side channel: POST {remote_request_id, host, port, run_id} → the KV's blocks go to host:port. */
export const KV_SEND_PATH = "/tidegate/kv/send";
/**
 * Most bytes of KV a prefill instance holds for decode instances (host memory, where vLLM holds them in the GPU's KV
 * cache): past it the oldest held request is dropped, and its decode instance's pull fails naming why.
 */
export const DEFAULT_KV_MAX_HELD_BYTES = 4 * 2 ** 30;


/** A request's KV held for its decode instance. */
interface Held {
  store: BlockStore;
  seed: number;
  timer: NodeJS.Timeout;
}

/** Runs `fn` after every earlier call has settled (one transfer at a time on one endpoint). */
class Queue {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const out = this.tail.then(fn, fn);
    this.tail = out.catch(() => undefined);
    return out;
  }
}

export interface KvTransferOptions {
  model: string;
  /** This instance's id, answered as `remote_engine_id`. */
  engineId: string;
  /** Where this instance's data ports listen (the engine's listen host). */
  host: string;
  /** The address other instances reach this one at, answered as `remote_host` and for its receive port (default `host`). */
  advertiseHost?: string;
  /** This instance's HTTP port (the side channel), known once it listens. */
  httpPort: () => number;
  /** Tensor parallelism, answered as `tp_size`. */
  tp: number;
  holdMs?: number;
  pullTimeoutMs?: number;
  /** Default DEFAULT_KV_MAX_HELD_BYTES. */
  maxHeldBytes?: number;
}


/** A 31-bit pattern seed from a request id (FNV-1a), the same on both instances. */
function seedFor(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return (h >>> 0) & 0x7fffffff;
}

/** One engine-sim's KV transfers: what it holds for decode instances, and its pulls from prefill instances. */
export class KvTransfer {
  private readonly held = new Map<string, Held>();
  private sendEndpoint: Endpoint | undefined;
  private recvEndpoint: Endpoint | undefined;
  private readonly sends = new Queue();
  private readonly receives = new Queue();
  private runSeq = Math.floor(Math.random() * 1e6);
  private closed = false;
  /** Totals for /metrics-like reads and tests: bytes sent and received, transfers failed. */
  readonly totals = { sentBytes: 0, receivedBytes: 0, failed: 0, dropped: 0 };
  private heldBytes = 0;

  constructor(private readonly o: KvTransferOptions) {}

  /**
   * After a prefill for a remote decode: holds the prompt's KV (`promptTokens` of them) under `requestId` and
   * returns the params the decode instance needs.
   */
  offer(requestId: string, promptTokens: number): KvTransferParams {
    if (this.closed) throw new TidegateError("cancelled", "engine closed");
    const { bytes, blocks } = kvShape(this.o.model, promptTokens);
    this.drop(requestId);
    const store = BlockStore.forModel(bytes, blocks);
    const seed = seedFor(requestId);
    store.fillPattern(seed);
    const timer = setTimeout(() => this.drop(requestId), this.o.holdMs ?? DEFAULT_KV_HOLD_MS);
    timer.unref();
    this.held.set(requestId, { store, seed, timer });
    this.heldBytes += bytes;
    // Oldest first (a Map keeps insertion order), never the one just offered.
    for (const old of this.held.keys()) {
      if (this.heldBytes <= (this.o.maxHeldBytes ?? DEFAULT_KV_MAX_HELD_BYTES) || old === requestId) break;
      this.drop(old);
      this.totals.dropped++;
    }
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: this.o.engineId,
      remote_host: this.advertised(),
      remote_port: this.o.httpPort(),
      remote_block_ids: Array.from({ length: blocks }, (_, b) => b),
      remote_request_id: requestId,
      tp_size: this.o.tp,
    };
  }

  /** Requests whose KV this instance holds now. */
  heldCount(): number {
    return this.held.size;
  }

  /** The side channel: sends the held KV of `remote_request_id` to the receiver at host:port in run `run_id`, then frees it. */
  async send(body: unknown): Promise<{ bytes: number; blocks: number; ms: number }> {
    const r = new ObjectReader(body, "", "invalid_request");
    const id = r.string("remote_request_id");
    const host = r.string("host");
    const port = r.number("port", undefined, { integer: true, min: 1, max: 65_535 });
    const runId = r.number("run_id", undefined, { integer: true, min: 0 });
    r.done();
    const h = this.held.get(id);
    if (h === undefined) throw new TidegateError("not_found", `engine ${this.o.engineId} holds no KV for request ${id} (never prefilled here, already sent, dropped after ${this.o.holdMs ?? DEFAULT_KV_HOLD_MS} ms, or dropped as the oldest past ${this.o.maxHeldBytes ?? DEFAULT_KV_MAX_HELD_BYTES} bytes held)`, { param: "remote_request_id" });
    return this.sends.run(async () => {
      const ep = (this.sendEndpoint ??= Endpoint.open({ host: this.o.host, transport: "tcp" }));
      const blocks = h.store.blockCount;
      const t0 = performance.now();
      const result = await ep.run(
        {
          runId,
          self: 0,
          peers: [{ id: this.o.engineId, host: this.advertised(), port: ep.port }, { id: "decode", host, port }],
          sends: Array.from({ length: blocks }, (_, b) => ({ peer: 1, block: b })),
          expect: [[], []],
          connectMs: 5000,
        },
        h.store,
      );
      this.totals.sentBytes += result.bytesSent;
      this.drop(id);
      return { bytes: result.bytesSent, blocks, ms: performance.now() - t0 };
    });
  }

  /**
   * Pulls a request's KV from the prefill instance `params` names: opens the receive, asks the side channel to send,
   * checks every byte. Resolves with the prompt tokens that arrived (`promptTokens − 1`: the last one is computed
   * here) and the transfer's time; rejects with upstream_error or timeout naming the prefill instance.
   */
  async pull(params: KvTransferParams, promptTokens: number, signal?: AbortSignal): Promise<{ remoteTokens: number; bytes: number; ms: number }> {
    if (this.closed) throw new TidegateError("cancelled", "engine closed");
    const { bytes, blocks } = kvShape(this.o.model, promptTokens);
    if (params.remote_block_ids.length !== blocks) {
      throw new TidegateError("invalid_request", `kv_transfer_params.remote_block_ids: ${params.remote_block_ids.length} blocks, but a ${promptTokens}-token prompt of ${this.o.model} has ${blocks} (${KV_BLOCK_TOKENS} tokens each)`, { param: "kv_transfer_params" });
    }
    const from = `prefill instance ${params.remote_engine_id} (${params.remote_host}:${params.remote_port})`;
    const timeoutMs = this.o.pullTimeoutMs ?? DEFAULT_KV_PULL_TIMEOUT_MS;
    const deadline = AbortSignal.timeout(timeoutMs);
    const stop = signal === undefined ? deadline : AbortSignal.any([deadline, signal]);
    return this.receives.run(async () => {
      const ep = (this.recvEndpoint ??= Endpoint.open({ host: this.o.host, transport: "tcp" }));
      const store = BlockStore.forModel(bytes, blocks);
      const runId = (this.runSeq = (this.runSeq + 1) % 0x7fffffff);
      const t0 = performance.now();
      try {
        const receiving = ep.run(
          { runId, self: 1, peers: [{ id: params.remote_engine_id, host: params.remote_host, port: 1 }, { id: this.o.engineId, host: this.advertised(), port: ep.port }], sends: [], expect: [Array.from({ length: blocks }, (_, b) => b), []], stallMs: 5000 },
          store,
          { signal: stop },
        );
        const asked = fetch(`http://${hostForUrl(params.remote_host)}:${params.remote_port}${KV_SEND_PATH}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ remote_request_id: params.remote_request_id, host: this.advertised(), port: ep.port, run_id: runId }),
          signal: stop,
        }).then(async (res) => {
          const text = await res.text();
          if (res.status !== 200) throw new TidegateError("upstream_error", `${from} refused to send the KV of ${params.remote_request_id}: ${res.status} ${text.slice(0, 300)}`);
        });
        // Either side failing ends both: a refused send cancels the receive.
        const [got] = await Promise.all([receiving, asked.catch((err: unknown) => (ep.cancel(), Promise.reject(err)))]);
        const bad = store.verifyPattern(seedFor(params.remote_request_id));
        if (bad !== -1) throw new TidegateError("upstream_error", `KV from ${from} differs from the prefill's at block ${bad}`);
        this.totals.receivedBytes += got.bytesReceived;
        return { remoteTokens: Math.max(0, promptTokens - 1), bytes: got.bytesReceived, ms: performance.now() - t0 };
      } catch (err) {
        this.totals.failed++;
        if (deadline.aborted) throw new TidegateError("timeout", `pulling the KV of ${params.remote_request_id} from ${from} took over ${timeoutMs} ms`);
        if (signal?.aborted) throw toTidegateError(signal.reason);
        const e = toTidegateError(err);
        throw e.code === "upstream_error" ? e : new TidegateError("upstream_error", `pulling the KV of ${params.remote_request_id} from ${from} failed: ${e.message}`);
      } finally {
        store.close();
      }
    });
  }

  /** Frees what is held and closes the data ports (once no transfer runs). */
  close(): void {
    this.closed = true;
    for (const id of [...this.held.keys()]) this.drop(id);
    for (const ep of [this.sendEndpoint, this.recvEndpoint]) {
      if (ep === undefined) continue;
      ep.cancel();
      try {
        ep.close();
      } catch {
        // a run still unwinding: the endpoint closes with the process
      }
    }
  }

  private advertised(): string {
    return this.o.advertiseHost ?? this.o.host;
  }

  private drop(id: string): void {
    const h = this.held.get(id);
    if (h === undefined) return;
    clearTimeout(h.timer);
    this.held.delete(id);
    this.heldBytes -= h.store.totalBytes;
    h.store.close();
  }
}

function hostForUrl(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}
