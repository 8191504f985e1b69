/**
 * Prefill/decode disaggregation in the region gateway (issue 48 item 3), as vLLM's proxy drives its disaggregated
 * instances (NixlConnector's `toy_proxy_server.py`): the request goes to a prefill instance with
 * `kv_transfer_params: {"do_remote_decode": true}`, one output token, not streamed; its answer's kv_transfer_params go
 * with the same request to a decode instance, which pulls the prompt's KV and streams the output
 * (GenerateRequest.kvTransfer; engines/sim/kv-transfer.ts is engine-sim's side, the openai-http adapter speaks it to
 * vLLM).
 *
 * A model disaggregates while it has a serving prefill instance and a serving decode instance (Engine.role; config
 * engines.roles); a request of it then takes the two steps, as behind vLLM's proxy — unless its uncached prompt is
 * under routing.pdMinPrefillTokens (`splits`): then it goes whole to a decode (or both) instance. Instances without a role
 * ("both") take the plain requests of models that do not. Each step picks by the routing policy among its role's
 * instances; a failed prefill is tried once more on another prefill instance (the decode step retries as any stream
 * does), and what still fails ends the request with its typed error.
 */
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { GenerateRequest } from "../../core/ports.js";
import { settle, type Chooser } from "./chooser.js";
import type { InstanceRecord, ModelEntry } from "./instance-table.js";
import { PREFILL_ROLES, WHOLE_ROLES, roleOf } from "./roles.js";

/** Whether `model`'s requests take the two steps now: a prefill and a decode instance are both serving. */
export function disaggregates(model: ModelEntry): boolean {
  let prefill = false;
  let decode = false;
  for (const e of model.endpoints) {
    for (const i of e.instances) {
      if (i.state !== "serving" || i.down !== undefined) continue;
      const r = roleOf(i);
      prefill ||= r === "prefill";
      decode ||= r === "decode";
    }
  }
  return prefill && decode;
}

/**
 * Whether a request of a disaggregated model is split in two: its uncached prompt — the prompt less the longest
 * prefix an instance that could take it whole (decode or both) is expected to hold — is at least
 * routing.pdMinPrefillTokens (default core/defaults.ts DEFAULT_PD_MIN_PREFILL_TOKENS, bench:pd's winner; 0: always, as
 * vLLM's proxy). A shorter one goes whole to such an instance, which
 * prefills it itself: llm-d splits a request only when its uncached prompt is long enough (its P/D threshold).
 */
export function splits(chooser: Chooser, model: ModelEntry, req: GenerateRequest, blocks: readonly number[]): boolean {
  const min = chooser.pdMinPrefillTokens;
  if (min <= 0) return true;
  let cached = 0;
  for (const e of model.endpoints) {
    for (const i of e.instances) if (i.state === "serving" && i.down === undefined && WHOLE_ROLES.has(roleOf(i))) cached = Math.max(cached, chooser.cachedOn(i, req, blocks));
  }
  return req.promptTokens - cached >= min;
}

/** Prefill attempts before the request fails (the first and one retry on another instance). */
const PREFILL_ATTEMPTS = 2;

/**
 * The prefill step: `req` prefilled for a remote decode on a prefill instance the policy picks, booked there while
 * it runs; resolves with the kv_transfer_params its answer carries. Rejects with the last failure (or
 * no_region_available when no prefill instance serves).
 */
export async function prefillForRemote(chooser: Chooser, model: ModelEntry, req: GenerateRequest, blocks: readonly number[], log: Logger, signal?: AbortSignal): Promise<Readonly<Record<string, unknown>>> {
  const tried = new Set<InstanceRecord>();
  let lastError: unknown = new TidegateError("no_region_available", `no prefill instance of ${req.model} is serving`);
  for (let attempt = 0; attempt < PREFILL_ATTEMPTS; attempt++) {
    signal?.throwIfAborted();
    const rec = chooser.choose(model, tried, blocks, PREFILL_ROLES);
    if (rec === undefined) break;
    tried.add(rec);
    const one: GenerateRequest = { ...req, maxTokens: 1, kvTransfer: { remoteDecode: true } };
    const ticket = chooser.book(rec, one, model.kvBytesPerToken, blocks);
    try {
      for await (const ev of rec.engine.generate(one, signal)) {
        if (ev.type !== "done") continue;
        if (ev.kvTransferParams === undefined) throw new TidegateError("upstream_error", `prefill instance ${rec.engine.instanceId} answered without kv_transfer_params`);
        return ev.kvTransferParams;
      }
      throw new TidegateError("upstream_error", `prefill instance ${rec.engine.instanceId} ended request ${req.id} without a done event`);
    } catch (err) {
      if (signal?.aborted) throw toTidegateError(signal.reason ?? err);
      lastError = err;
      log.warn("prefill for a remote decode failed", { instanceId: rec.engine.instanceId, requestId: req.id, err });
      const te = toTidegateError(err);
      if (te.status < 500 && te.code !== "rate_limited") break; // the request's own fault: another instance would refuse it too
    } finally {
      settle(ticket);
    }
  }
  throw lastError;
}
