/**
 * vLLM's prefill/decode contract as data (NixlConnector's `kv_transfer_params`; kv-transfer.ts has the whole
 * exchange): the params a prefill instance answers and a decode instance takes, what a request's params ask of an
 * instance, and the size of a prompt's KV. Shared by engine-sim's HTTP face (kv-transfer.ts, bytes over the native
 * data plane) and the in-process engines (kv-fabric.ts, bytes timed on the clock), without the native addon.
 */
import { TidegateError } from "../../core/errors.js";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { ObjectReader } from "../../core/validate.js";

/** Tokens per KV block (vLLM's default --block-size). */
export const KV_BLOCK_TOKENS = 16;
/** How long a prefill instance keeps a request's KV for its decode instance (vLLM: VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s). */
export const DEFAULT_KV_HOLD_MS = 480_000;
/** How long a decode instance waits for a pull before it fails the request. */
export const DEFAULT_KV_PULL_TIMEOUT_MS = 30_000;

/** What the prefill instance answers and the decode instance takes: vLLM's field names. */
export interface KvTransferParams {
  do_remote_prefill: boolean;
  do_remote_decode: boolean;
  remote_engine_id: string;
  remote_host: string;
  remote_port: number;
  remote_block_ids: number[];
  remote_request_id: string;
  tp_size: number;
}

/** What a request's `kv_transfer_params` asks of this instance. */
export type KvAsk = { kind: "none" } | { kind: "prefill-for-remote" } | { kind: "decode-from-remote"; params: KvTransferParams };

/** Reads a body's `kv_transfer_params` (absent or null: none); errors name the field. */
export function kvAskOf(body: Record<string, unknown>): KvAsk {
  const raw = body.kv_transfer_params;
  if (raw === undefined || raw === null) return { kind: "none" };
  const r = new ObjectReader(raw, "kv_transfer_params", "invalid_request");
  const decode = r.boolean("do_remote_decode", false);
  const prefill = r.boolean("do_remote_prefill", false);
  if (decode && prefill) r.fail("do_remote_prefill", "a request is either prefilled for a remote decode or decoded from a remote prefill, not both");
  if (decode) {
    r.allow("remote_engine_id", "remote_host", "remote_port", "remote_block_ids", "remote_request_id", "tp_size").done();
    return { kind: "prefill-for-remote" };
  }
  if (!prefill) {
    r.allow("remote_engine_id", "remote_host", "remote_port", "remote_block_ids", "remote_request_id", "tp_size").done();
    return { kind: "none" };
  }
  const params: KvTransferParams = {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_engine_id: r.string("remote_engine_id"),
    remote_host: r.string("remote_host"),
    remote_port: r.number("remote_port", undefined, { integer: true, min: 1, max: 65_535 }),
    remote_block_ids: r.array("remote_block_ids", (v, path) => {
      if (!Number.isInteger(v) || (v as number) < 0) throw new TidegateError("invalid_request", `${path}: expected a block id (an integer ≥ 0)`, { param: path });
      return v as number;
    }),
    remote_request_id: r.string("remote_request_id"),
    tp_size: r.number("tp_size", 1, { integer: true, min: 1 }),
  };
  r.done();
  return { kind: "decode-from-remote", params };
}

/** Bytes and blocks of `tokens` tokens of `model`'s KV. */
export function kvShape(model: string, tokens: number): { bytes: number; blocks: number } {
  const spec = MODEL_SPECS[model];
  if (spec === undefined) throw new TidegateError("model_not_found", `no model shape for ${model}`);
  return { bytes: Math.max(1, tokens) * kvBytesPerToken(spec), blocks: Math.max(1, Math.ceil(tokens / KV_BLOCK_TOKENS)) };
}
