/**
 * The two checks of prefill/decode across network namespaces (issue 48 must-show 3), shared by the fixed-engine test
 * (pd.test.ts) and the agent-started one (pd-agents.test.ts): a stream whose prompt's KV crosses the shaped links,
 * checked byte for byte at the decode engine and timed against the shaped rate; a `kill -9` of the prefill engine in
 * the middle of a transfer, which must end the request with an error within 3 s.
 */
import OpenAI from "openai";
import { expect } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { metricSum } from "../e2e/procs.js";
import { waitFor } from "../region/cluster.js";

/** Streams one ~270-token prompt (~31 MB of llama3.2-3b KV) through `routerUrl`; checks the bytes and the time at `decodeUrl`. */
export async function streamKvAcross(o: { routerUrl: string; decodeUrl: string; model: string; rateMbit: number; label: string }): Promise<void> {
  const client = new OpenAI({ baseURL: `${o.routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
  // The decode engine's counters are cumulative: this request's share is what they grow by.
  const counter = (name: string) => metricSum(o.decodeUrl, name);
  const [bytes0, failed0, seconds0] = [await counter("tidegate_kv_transfer_received_bytes_total"), await counter("tidegate_kv_transfer_failed_total"), await counter("tidegate_kv_transfer_seconds_sum")];
  const stream = await client.chat.completions.create({ model: o.model, messages: [{ role: "user", content: "tidegate ".repeat(120) }], max_tokens: 4, stream: true, stream_options: { include_usage: true } });
  let prompt = 0;
  let completion = 0;
  for await (const chunk of stream) if (chunk.usage) [prompt, completion] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
  expect(completion).toBe(4);
  const bytes = prompt * kvBytesPerToken(MODEL_SPECS[o.model]!);
  expect((await counter("tidegate_kv_transfer_received_bytes_total")) - bytes0).toBe(bytes);
  expect((await counter("tidegate_kv_transfer_failed_total")) - failed0).toBe(0);
  const seconds = (await counter("tidegate_kv_transfer_seconds_sum")) - seconds0;
  const shaped = (bytes * 8) / (o.rateMbit * 1e6);
  console.log(`${o.label}: KV of ${prompt} prompt tokens: ${bytes} bytes in ${seconds.toFixed(3)} s (${shaped.toFixed(3)} s at ${o.rateMbit} Mbit/s)`);
  // The bytes crossed the shaped links: no faster than the rate allows, and not far slower.
  expect(seconds).toBeGreaterThan(shaped * 0.9);
  expect(seconds).toBeLessThan(shaped * 3 + 1);
}

/**
 * Streams a ~1,000-token prompt (~110 MB of KV, seconds at a few hundred Mbit/s); once the prefill step has finished
 * and the decode engine is pulling, `kill()` kills the prefill engine: the request must fail within 3 s and the decode
 * engine count one failed pull.
 */
export async function killPrefillMidTransfer(o: { routerUrl: string; prefillUrl: string; decodeUrl: string; model: string; kill(): void; label: string }): Promise<void> {
  const client = new OpenAI({ baseURL: `${o.routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
  const before = await metricSum(o.prefillUrl, "vllm:request_success_total");
  const failedBefore = await metricSum(o.decodeUrl, "tidegate_kv_transfer_failed_total");
  const started = (async () => {
    const stream = await client.chat.completions.create({ model: o.model, messages: [{ role: "user", content: "tidegate ".repeat(430) }], max_tokens: 4, stream: true });
    for await (const _ of stream) void _;
  })();
  const outcome = started.then(
    () => ({ ok: true as const, at: Date.now() }),
    (err: unknown) => ({ ok: false as const, at: Date.now(), err }),
  );
  // The prefill answered (its request finished): the decode instance is pulling now.
  await waitFor("the prefill step to finish", async () => ((await metricSum(o.prefillUrl, "vllm:request_success_total")) > before ? true : undefined), 30_000);
  await new Promise((r) => setTimeout(r, 500));
  const killedAt = Date.now();
  o.kill();
  const r = await outcome;
  expect(r.ok).toBe(false);
  console.log(`${o.label}: kill -9 of the prefill engine: the request failed ${r.at - killedAt} ms later: ${r.ok ? "" : String(r.err)}`);
  expect(r.at - killedAt).toBeLessThan(3000);
  expect(await metricSum(o.decodeUrl, "tidegate_kv_transfer_failed_total")).toBe(failedBefore + 1);
}
