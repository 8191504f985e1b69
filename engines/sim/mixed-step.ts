/**
 * The time of one chunked-prefill engine step (core.ts, SimCoreOptions.maxNumBatchedTokens): one forward pass over
 * every running request's decode token and chunks of prompts, timed from the fitted performance model
 * (core/perf/model.ts) — no curve of its own, none was measured.
 *
 * Composition: the decode iteration of the running batch, τ(B, C), plus what the prefill curve adds for the chunk
 * tokens on top of the B tokens that iteration already moves:
 *
 *   step = τ(B, C) + max(0, prefill(B + T, n) − prefill(B, n))      (B ≥ 1, T ≥ 1)
 *   step = prefill(T, n)                                            (B = 0: a prefill of the chunks alone)
 *   step = τ(B, C)                                                  (T = 0: a plain decode iteration)
 *
 * B = decodes, C = their context tokens, T = chunk tokens, n = chunk sequences (the single-sequence curve for one,
 * the batched curve for more, as a whole-prompt prefill of those prompts). Where it comes from: Sarathi-Serve
 * (Agrawal et al., OSDI'24; arXiv 2403.02310v3 §4.2, "stall-free batching") runs prefill chunks inside decode
 * iterations by using "the arithmetic intensity slack in decode iterations", and vLLM's docs (Optimization and
 * Tuning, "Chunked Prefill") put compute-bound prefill and memory-bound decode in one batch for the same reason. The
 * prefill curve is flat below a few hundred tokens (its launch floor, core/perf/fit.ts) and then grows with tokens,
 * so a small chunk beside decodes costs almost nothing over the decode iteration and a large one costs what its
 * tokens add on the compute-bound part of the curve; the decode term keeps the attention over the decodes' context.
 * Not charged: a chunk's attention over the earlier chunks of its own prompt beyond what the curve at the step's
 * tokens holds (the curve was measured on whole prompts from an empty cache).
 */
import type { PerfProfile } from "../../core/perf/model.js";

/**
 * One step's compute (ms, before timeScale and any per-pass overhead): `decodes` running requests holding
 * `contextTokens` of context, each computing one token, beside `chunkTokens` prompt tokens of `chunkSequences`
 * requests (composition in the module comment). 0 for an empty step.
 */
export function mixedStepMs(profile: PerfProfile, decodes: number, contextTokens: number, chunkTokens: number, chunkSequences: number): number {
  if (chunkTokens <= 0) return decodes > 0 ? profile.decodeIterMs(decodes, contextTokens) : 0;
  const sequences = Math.max(1, chunkSequences);
  if (decodes <= 0) return profile.prefillMs(chunkTokens, sequences);
  const added = profile.prefillMs(decodes + chunkTokens, sequences) - profile.prefillMs(decodes, sequences);
  return profile.decodeIterMs(decodes, contextTokens) + Math.max(0, added);
}
