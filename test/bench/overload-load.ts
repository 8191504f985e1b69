/**
 * bench:overload's load generator (test/bench/overload.ts runs its arms with it): streaming completions of one model
 * sent open-loop (Poisson arrivals) or closed-loop, each recorded with its status, TTFT, TPOT, tokens and whether it
 * finished with [DONE]; the fleet's capacity measured by feeding the engines directly; a process's CPU and RSS from
 * /proc. Loopback only; every request bounded by REQUEST_TIMEOUT_MS and every loop by its count and time.
 */
import { readFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";

export const MODEL = "llama3.2-3b";
export const MAX_BATCH = 16;
export const MAX_TOKENS = 64;
export const PROMPT = "Tell me about the tides and the moon, and why they rise and fall twice a day. ".repeat(6);
export const KEYS = { a: "tg-bench-tenant-a-key", b: "tg-bench-tenant-b-key" } as const;
export type Tenant = keyof typeof KEYS;
/** The longest any request may take (bounded loads). */
export const REQUEST_TIMEOUT_MS = 30_000;

export const agent = new Agent({ keepAlive: true, maxSockets: 4096 });

/** One request's record. */
export interface Sample {
  phase: string;
  tenant: Tenant;
  startMs: number;
  status: number;
  /** Time to the response (429) or to the first token (200), ms; NaN when neither came. */
  ttftMs: number;
  /** Mean time per output token after the first (ms). */
  tpotMs: number;
  tokens: number;
  /** The stream ended with [DONE] (a 200 without it was cut: an in-stream error or a broken connection). */
  done: boolean;
}

/** Sends one streaming completion and records it; never rejects. */
export function send(base: string, tenant: Tenant | undefined, phase: string): Promise<Sample> {
  const t0 = performance.now();
  const startMs = Date.now();
  const body = JSON.stringify({ model: MODEL, prompt: PROMPT, max_tokens: MAX_TOKENS, stream: true });
  const url = new URL(`${base}/v1/completions`);
  return new Promise((resolve) => {
    const s: Sample = { phase, tenant: tenant ?? "a", startMs, status: 0, ttftMs: Number.NaN, tpotMs: Number.NaN, tokens: 0, done: false };
    let firstAt = 0;
    let lastAt = 0;
    const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
    if (tenant !== undefined) headers.authorization = `Bearer ${KEYS[tenant]}`;
    const req = httpRequest({ agent, host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers }, (res) => {
      s.status = res.statusCode ?? 0;
      if (s.status !== 200) {
        s.ttftMs = performance.now() - t0;
        res.resume();
        res.on("end", () => resolve(s));
        return;
      }
      let tail = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        // A token chunk: `"text":"` followed by its text (the finish chunk's text is empty). A match is counted once
        // the character after it has arrived (so it never lies in the kept tail).
        const text = tail + chunk;
        let at = text.indexOf('"text":"');
        while (at !== -1 && at + 8 < text.length) {
          if (text[at + 8] !== '"') {
            const now = performance.now();
            if (s.tokens === 0) {
              firstAt = now;
              s.ttftMs = now - t0;
            }
            lastAt = now;
            s.tokens++;
            tokensReceived++;
          }
          at = text.indexOf('"text":"', at + 8);
        }
        if (text.includes("[DONE]")) s.done = true;
        tail = text.slice(-8);
      });
      res.on("end", () => {
        if (s.tokens > 1) s.tpotMs = (lastAt - firstAt) / (s.tokens - 1);
        resolve(s);
      });
      res.on("error", () => resolve(s));
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(s));
    req.end(body);
  });
}

/**
 * Open-loop Poisson arrivals at `ratePerS` for `seconds` (seeded), each from a tenant `pick()` gives; resolves with
 * every request's record once all have ended (each bounded by REQUEST_TIMEOUT_MS).
 */
export async function openLoop(base: string, phase: string, ratePerS: number, seconds: number, pick: (i: number) => Tenant, seed: number): Promise<Sample[]> {
  let x = seed >>> 0 || 1;
  const rand = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return ((x >>> 0) + 0.5) / 4294967296;
  };
  const pending: Promise<Sample>[] = [];
  const t0 = performance.now();
  let due = 0;
  for (let i = 0; ; i++) {
    due += (-Math.log(rand()) / ratePerS) * 1000;
    if (due > seconds * 1000) break;
    const wait = t0 + due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(send(base, pick(i), phase));
  }
  return Promise.all(pending);
}

/** Every token any request of this process has received so far (the capacity arm reads it over a window). */
let tokensReceived = 0;

/**
 * Completion tokens/s of every engine fed directly by MAX_BATCH closed-loop workers (each engine's whole batch busy),
 * counted token by token over `seconds` after one request's lifetime of warm-up. The workers start spread over that
 * lifetime: started together, requests of one length finish together and the next ones are prefilled together, one
 * batched prefill per cohort instead of one in nearly every decode step — measured, a closed loop started together
 * reaches a mean TPOT of 60.4 ms where Poisson arrivals at the same engine give 76 ms, so a synchronized baseline
 * credits the engines with a capacity no arrival process reaches.
 */
export async function capacity(engineUrls: readonly string[], seconds: number): Promise<{ tokensPerS: number; requestsPerS: number; tpotMs: number; requests: number; failed: number }> {
  const probe = await send(engineUrls[0]!, undefined, "capacity");
  if (probe.status !== 200) throw new Error(`engine ${engineUrls[0]} answered ${probe.status}`);
  const lifetimeMs = probe.ttftMs + probe.tpotMs * (probe.tokens - 1);
  const windowStart = performance.now() + lifetimeMs;
  const end = windowStart + seconds * 1000;
  const tpots: number[] = [];
  let startTokens = 0;
  let windowTokens = 0;
  let requests = 0;
  let failed = 0;
  const marks = new Promise<void>((r) => setTimeout(r, lifetimeMs))
    .then(() => void (startTokens = tokensReceived))
    .then(() => new Promise<void>((r) => setTimeout(r, seconds * 1000)))
    .then(() => void (windowTokens = tokensReceived - startTokens));
  await Promise.all([
    marks,
    ...engineUrls.flatMap((u) =>
      Array.from({ length: MAX_BATCH }, async (_, i) => {
        await new Promise((r) => setTimeout(r, (i / MAX_BATCH) * lifetimeMs));
        while (performance.now() < end) {
          const r = await send(u, undefined, "capacity");
          requests++;
          // A failed request is counted (the goodput check names it) and ends its worker: the capacity is then
          // short, and no check passes on it.
          if (!servedInFull(r)) {
            failed++;
            return;
          }
          if (Number.isFinite(r.tpotMs)) tpots.push(r.tpotMs);
        }
      }),
    ),
  ]);
  const tokensPerS = windowTokens / seconds;
  return { tokensPerS, requestsPerS: tokensPerS / MAX_TOKENS, tpotMs: mean(tpots), requests, failed };
}

/** A 200 that streamed every one of its MAX_TOKENS tokens. */
export function servedInFull(s: Sample): boolean {
  return s.status === 200 && s.tokens === MAX_TOKENS;
}

/** CPU seconds (user + system) process `pid` has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

export function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m === null ? Number.NaN : Number(m[1]);
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}
