/**
 * Streams watched from the client's side, for the fault tests (region-dark, engine-stop, dev-pause): one streaming completion
 * recorded with its times (start, first byte, end), the region that served it (`x-tidegate-region`), whether it
 * finished with `[DONE]` and the in-stream OpenAI error it ended with instead; a closed-loop load of them; the child
 * processes of a process (to SIGSTOP the engine-sims under a region's keepers); the config of static regions those
 * tests run as `tidegate region --spawn-engines` behind `tidegate global`. Loopback only, every wait bounded.
 */
import { readdirSync, readFileSync } from "node:fs";

/** One stream as its client saw it (times: Date.now() ms). */
export interface StreamResult {
  startedAtMs: number;
  /** The HTTP status; -1 when the connection itself broke (no answer: e.g. the router was stopped). */
  status: number;
  region: string | null;
  /** ms from its start to its first body byte (or to the error body); -1 when none came. */
  firstMs: number;
  endedAtMs: number;
  done: boolean;
  /** The in-stream error's code and message, when it ended with one after its 200. */
  inStreamError: string | undefined;
  inStreamMessage: string | undefined;
}

/** One streaming completion of `model` at `url` (the router's base URL); never rejects; bounded by `timeoutMs`. */
export async function streamOnce(url: string, model: string, maxTokens: number, headers: Record<string, string> = {}, timeoutMs = 20_000, onFirst?: () => void): Promise<StreamResult> {
  const r: StreamResult = { startedAtMs: Date.now(), status: 0, region: null, firstMs: -1, endedAtMs: 0, done: false, inStreamError: undefined, inStreamMessage: undefined };
  let text = "";
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ model, prompt: "tell me a story", max_tokens: maxTokens, stream: true }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    r.status = res.status;
    r.region = res.headers.get("x-tidegate-region");
    if (res.body !== null) {
      const dec = new TextDecoder();
      for await (const chunk of res.body) {
        if (r.firstMs < 0) {
          r.firstMs = Date.now() - r.startedAtMs;
          onFirst?.();
        }
        text += dec.decode(chunk as Uint8Array, { stream: true });
      }
    }
  } catch {
    r.status = -1;
  }
  r.endedAtMs = Date.now();
  r.done = text.includes("[DONE]");
  const last = text.trim().split("\n\n").at(-1) ?? "";
  if (r.status === 200 && !r.done && last.startsWith("data: ")) {
    try {
      const e = (JSON.parse(last.slice(6)) as { error?: { code?: string; message?: string } }).error;
      r.inStreamError = e?.code;
      r.inStreamMessage = e?.message;
    } catch {
      // a cut chunk: no error object
    }
  }
  return r;
}

/** A closed loop of `concurrency` streams; `maxTokens` applies to streams started from then on; `stop()` ends it. */
export function streamLoad(url: string, model: string, concurrency: number, maxTokens: number, headers: Record<string, string> = {}) {
  const results: StreamResult[] = [];
  const open = new Set<{ startedAtMs: number; first: boolean }>();
  let running = true;
  const ctl = {
    maxTokens,
    results,
    /** Streams open now that have had their first byte. */
    flowing: () => [...open].filter((s) => s.first).length,
    /** Whether a stream started before `atMs` is still open. */
    openSince: (atMs: number) => [...open].some((s) => s.startedAtMs < atMs),
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
  const workers = Array.from({ length: concurrency }, async () => {
    while (running) {
      const s = { startedAtMs: Date.now(), first: false };
      open.add(s);
      results.push(await streamOnce(url, model, ctl.maxTokens, headers, 20_000, () => void (s.first = true)));
      open.delete(s);
    }
  });
  return ctl;
}

/** The pids whose parent is `pid` (from /proc). */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

/** Polls `cond` every 25 ms until true (returns the ms it took) or `timeoutMs` passes (throws naming `what`). */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    try {
      if (await cond()) return Date.now() - t0;
    } catch {
      // not yet
    }
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A config of static regions `names` (gRPC on 127.0.0.1:`ports[i]`, each the others' proximity), each `instances`
 * fixed instances of `model` on 2 × h100 — simulated engines at ×1 time (`--spawn-engines`: engine-sim children) —
 * for `tidegate region` and `tidegate global` (router on port 0).
 */
export function staticRegionsConfig(model: string, names: readonly string[], ports: readonly number[], instances: number): object {
  return {
    models: [{ name: model, gpusPerInstance: { "h100-80gb": 2 } }],
    regions: names.map((name, i) => ({
      name,
      proximity: names.filter((o) => o !== name),
      grpcAddress: `127.0.0.1:${ports[i]}`,
      gpus: [{ type: "h100-80gb", count: 2 * instances }],
      endpoints: [{ model, gpu: "h100-80gb", instances, minInstances: instances, maxInstances: instances }],
    })),
    router: { port: 0 },
    controller: { actuator: "static" },
    engines: { kind: "sim", timeScale: 1 },
  };
}

/** Whether the router at `url` sees every region of `names` available (its /healthz). */
export async function regionsAvailable(url: string, names: readonly string[]): Promise<boolean> {
  const h = (await (await fetch(`${url}/healthz`)).json()) as { regions: Record<string, { available: boolean }> };
  return names.every((r) => h.regions[r]?.available === true);
}
