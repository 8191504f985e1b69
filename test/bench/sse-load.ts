/**
 * A streaming load generator for OpenAI-compatible servers that counts SSE events by scanning bytes (occurrences of
 * `data: `), never parsing chunks. `concurrency` workers each send `requestsPerWorker` streaming requests back to
 * back over keep-alive connections; each request's time to first token (first `data: ` after the request was
 * sent), its event count and its total time are recorded. Used by bench:router for both the direct and the
 * two-hop path so the two are measured by the same code.
 */
import { Agent, request } from "node:http";

const NEEDLE = Buffer.from("data: ");
/** Events per streamed completion that are not tokens: the finish chunk and `[DONE]` (no usage requested). */
export const NON_TOKEN_EVENTS = 2;

export interface StreamResult {
  ttftMs: number;
  totalMs: number;
  /** `data: ` occurrences in the body. */
  events: number;
  status: number;
}

export interface LoadResult {
  wallMs: number;
  results: StreamResult[];
  /** Requests that did not return 200 or whose event count was not `expectedEvents`. */
  failures: number;
  /** Token events (events − NON_TOKEN_EVENTS per request) over all successful requests. */
  tokens: number;
  tokensPerS: number;
  ttftMedianMs: number;
  ttftP99Ms: number;
}

/** Counts `data: ` in `buf`, given the last `NEEDLE.length − 1` bytes of the previous chunk (`carry`). */
export function countEvents(carry: Buffer, buf: Buffer): { count: number; carry: Buffer } {
  const joined = carry.length > 0 ? Buffer.concat([carry, buf]) : buf;
  let count = 0;
  let at = joined.indexOf(NEEDLE);
  while (at !== -1) {
    count++;
    at = joined.indexOf(NEEDLE, at + NEEDLE.length);
  }
  const keep = Math.min(NEEDLE.length - 1, joined.length);
  return { count, carry: Buffer.from(joined.subarray(joined.length - keep)) };
}

/** Sends one streaming POST and scans its body. Rejects on socket errors or after `timeoutMs`. */
export function streamOnce(agent: Agent, url: URL, body: string, timeoutMs: number): Promise<StreamResult> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request(
      { agent, host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        let events = 0;
        let carry: Buffer = Buffer.alloc(0);
        let ttftMs = -1;
        res.on("data", (chunk: Buffer) => {
          const r = countEvents(carry, chunk);
          carry = r.carry;
          if (r.count > 0 && ttftMs < 0) ttftMs = Number(process.hrtime.bigint() - t0) / 1e6;
          events += r.count;
        });
        res.on("end", () => {
          clearTimeout(timer);
          resolve({ ttftMs, totalMs: Number(process.hrtime.bigint() - t0) / 1e6, events, status: res.statusCode ?? 0 });
        });
        res.on("error", reject);
      },
    );
    const timer = setTimeout(() => req.destroy(new Error(`request timed out after ${timeoutMs} ms`)), timeoutMs);
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}

/** Median (p = 0.5) or any quantile of `xs` (nearest rank); NaN for an empty list. */
export function quantile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
}

/**
 * Runs one round: `concurrency` workers × `requestsPerWorker` sequential streams of `body` to `url`. A stream
 * counts as a failure unless it is a 200 with exactly `expectedEvents` events.
 */
export async function runLoad(opts: { url: string; body: string; concurrency: number; requestsPerWorker: number; expectedEvents: number; timeoutMs: number; agent: Agent }): Promise<LoadResult> {
  const url = new URL(opts.url);
  const results: StreamResult[] = [];
  let failures = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: opts.concurrency }, async () => {
      for (let i = 0; i < opts.requestsPerWorker; i++) {
        try {
          const r = await streamOnce(opts.agent, url, opts.body, opts.timeoutMs);
          if (r.status !== 200 || r.events !== opts.expectedEvents) failures++;
          else results.push(r);
        } catch {
          failures++;
        }
      }
    }),
  );
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const tokens = results.reduce((s, r) => s + r.events - NON_TOKEN_EVENTS, 0);
  const ttfts = results.map((r) => r.ttftMs);
  return { wallMs, results, failures, tokens, tokensPerS: tokens / (wallMs / 1000), ttftMedianMs: quantile(ttfts, 0.5), ttftP99Ms: quantile(ttfts, 0.99) };
}
