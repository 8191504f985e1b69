/**
 * One stage replica of a pipelined model as its own process (`tidegate engine-sim --stage <json>`, started by a
 * node agent): QUART's unit of scaling (paper `quart_004`, §4.1–4.3: a stage is a contiguous share of the layers on
 * one GPU; a key stage grows by starting more replicas of it, §4.3, each from the server's host-memory stage
 * cache, §6.1). The stage-level engine model is the one `pipeline.ts` simulates in one process (README.md, "The
 * engine model"): each replica serves one request at a time, FIFO, for `Pipeline.stageMs` of the request (the
 * shared performance model scaled by the stage's share of layers), then hands its activations on.
 *
 * The wire (HTTP/1.1 on the engine host):
 * - `POST /tidegate/stage/run`, header `x-tidegate-stage` = JSON `{id, seed, promptTokens, outputTokens, next}`
 *   (`next`: for every later stage, the base URLs of its replicas), body = the activations from the previous stage
 *   (hidden × dtype × tokens bytes, `Pipeline.activationBytes`; empty into stage 0). The answer is 200 with an
 *   NDJSON stream at once; the request queues here, is served, and its activations are POSTed to the next stage's
 *   replica with the fewest requests this process has outstanding there (a 503 from a draining or loading replica
 *   moves to the next candidate), whose stream is relayed back. The last stage writes the tokens,
 *   `{"t": "<text>"}` per token, then `{"done": true}`; a failure anywhere is `{"error": "…"}` and the end.
 *   Tokens reach the client back along the chain when the last stage finishes (time to first token ≈ latency, as
 *   in `PipelineEngine`). A client that goes away cancels the request here (dropped from the queue, or its
 *   forward aborted).
 * - `GET /tidegate/stage`: queue, busy, active (accepted, answer not ended), arrivals and completions in the window
 *   as ages (model ms before now — every process has its own clock origin), for the head's scaler (stage-fleet.ts).
 * - `POST /tidegate/stage/drain`: new requests get 503 from now on (the head stops the process once it is idle).
 * - `GET /health`: 503 `loading` until the replica's start (`loadMs`: the host-memory → GPU copy of a stage-cache hit
 *   or the fetch of a miss, cache.ts `startMs`, chosen by the head's scaler) has passed, then 200.
 *
 * Durations are in model ms on the injected Clock (a dilated WallClock under --time-scale in the process).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Clock } from "../../core/clock.js";
import { syntheticToken } from "../../core/openai.js";
import { ObjectReader, ValidationError } from "../../core/validate.js";
import { readLayoutFlag } from "./keystage-config.js";
import { Pipeline } from "./stages.js";

/** What `engine-sim --stage` takes: the pipeline's layout, which stage this replica serves and its start time. */
export interface StageProcessSpec {
  layersPerStage: number[];
  profileTp: number;
  hiddenSize: number;
  /** Index of the stage this process serves. */
  stage: number;
  /** Model ms before the replica serves (its parameters' copy into the GPU; cache.ts `startMs`). */
  loadMs: number;
  /** Window of arrivals and completions the status reports (model ms). */
  windowMs: number;
}

/** The spec as the JSON text `engine-sim --stage` and StartEngine's `stage` carry. */
export function stageSpecJson(spec: StageProcessSpec): string {
  return JSON.stringify(spec);
}

/** Parses `--stage` JSON for (model, gpu); errors name `path` and the field. */
export function parseStageSpec(text: string, model: string, gpu: string, path = "--stage"): StageProcessSpec {
  const { r, layout } = readLayoutFlag(text, model, gpu, path);
  const stage = r.number("stage", undefined, { integer: true, min: 0, max: layout.layersPerStage.length - 1 });
  const loadMs = r.number("loadMs", 0, { min: 0, max: 3_600_000 });
  const windowMs = r.number("windowMs", 10_000, { min: 100, max: 3_600_000 });
  r.done();
  return { layersPerStage: layout.layersPerStage, profileTp: layout.profileTp, hiddenSize: layout.hiddenSize, stage, loadMs, windowMs };
}

/** The `x-tidegate-stage` header: one request on its way through the stages. */
export interface StageRequestMeta {
  id: string;
  seed: number;
  promptTokens: number;
  outputTokens: number;
  /** Base URLs of the replicas of each later stage, in stage order. */
  next: string[][];
}

/** What `GET /tidegate/stage` answers. */
export interface StageStatus {
  stage: number;
  loaded: boolean;
  draining: boolean;
  queue: number;
  busy: number;
  /** Requests accepted whose answer has not ended (queued, in service, or relaying the later stages' stream). */
  active: number;
  served: number;
  windowMs: number;
  /** Arrivals in the window, as model ms before now, oldest first. */
  arrivalsAgoMs: number[];
  /** Completions in the window: [model ms before now, service ms]. */
  servicesAgoMs: [number, number][];
}

export const STAGE_HEADER = "x-tidegate-stage";

function parseMeta(text: string | undefined, stages: number, stage: number): StageRequestMeta {
  if (text === undefined) throw new ValidationError(STAGE_HEADER, "missing");
  const r = new ObjectReader(JSON.parse(text) as unknown, STAGE_HEADER);
  const id = r.string("id");
  const seed = r.number("seed", 0, { integer: true });
  const promptTokens = r.number("promptTokens", undefined, { integer: true, min: 1 });
  const outputTokens = r.number("outputTokens", undefined, { integer: true, min: 1 });
  const next = r.raw("next");
  r.done();
  if (!Array.isArray(next) || next.length !== stages - stage - 1 || !next.every((l) => Array.isArray(l) && l.length > 0 && l.every((u) => typeof u === "string" && /^https?:\/\//.test(u)))) {
    throw new ValidationError(`${STAGE_HEADER}.next`, `must list the replica URLs of each of the ${stages - stage - 1} later stages`);
  }
  return { id, seed, promptTokens, outputTokens, next: next as string[][] };
}

interface Job {
  meta: StageRequestMeta;
  res: ServerResponse;
  cancelled: boolean;
  /** Aborts the forward to the next stage (the client went away). */
  forward: AbortController;
}

/** Wiring of a `StageServer`. */
export interface StageServerOptions {
  model: string;
  gpu: string;
  spec: StageProcessSpec;
  /** Model time (a dilated WallClock under --time-scale). */
  clock: Clock;
}

/** One stage replica behind HTTP; see the module comment. */
export class StageServer {
  readonly pipeline: Pipeline;
  private readonly stage: number;
  private readonly queue: Job[] = [];
  private busy: Job | undefined;
  private loaded = false;
  private draining = false;
  private active = 0;
  private served = 0;
  private readonly arrivals: number[] = [];
  private readonly services: [number, number][] = [];
  /** Requests this process has outstanding at each next-stage replica (its pick: the fewest). */
  private readonly outstanding = new Map<string, number>();
  private server: Server | undefined;
  /** The activations' bytes (zeros: a simulated stage computes nothing), the largest size needed so far. */
  private zeros = Buffer.alloc(0);
  private closed = false;

  constructor(private readonly o: StageServerOptions) {
    this.pipeline = new Pipeline({ model: o.model, gpu: o.gpu, layersPerStage: o.spec.layersPerStage, profileTp: o.spec.profileTp, hiddenSize: o.spec.hiddenSize });
    this.stage = o.spec.stage;
    if (o.spec.loadMs > 0) void o.clock.sleep(o.spec.loadMs).then(() => (this.loaded = true));
    else this.loaded = true;
  }

  /** Listens; resolves with the base URL. */
  listen(port: number, host: string): Promise<string> {
    const server = createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 30_000;
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        const a = server.address() as AddressInfo;
        resolve(`http://${host.includes(":") ? `[${host}]` : host}:${a.port}`);
      });
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const j of this.queue) this.fail(j, "the stage process is closing");
    this.queue.length = 0;
    await new Promise<void>((resolve) => {
      if (this.server === undefined) return resolve();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  status(): StageStatus {
    const now = this.o.clock.now();
    const from = now - this.o.spec.windowMs;
    while (this.arrivals.length > 0 && this.arrivals[0]! < from) this.arrivals.shift();
    while (this.services.length > 0 && this.services[0]![0] < from) this.services.shift();
    return {
      stage: this.stage,
      loaded: this.loaded,
      draining: this.draining,
      queue: this.queue.length,
      busy: this.busy === undefined ? 0 : 1,
      active: this.active,
      served: this.served,
      windowMs: this.o.spec.windowMs,
      arrivalsAgoMs: this.arrivals.map((t) => now - t),
      servicesAgoMs: this.services.map(([t, d]) => [now - t, d]),
    };
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0];
    const json = (code: number, body: unknown) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method === "GET" && path === "/health") return json(this.loaded ? 200 : 503, { status: this.loaded ? "ok" : "loading", stage: this.stage });
    if (req.method === "GET" && path === "/tidegate/stage") return json(200, this.status());
    if (req.method === "POST" && path === "/tidegate/stage/drain") {
      req.resume();
      this.draining = true;
      return json(200, this.status());
    }
    if (req.method === "POST" && path === "/tidegate/stage/run") return void this.accept(req, res);
    req.resume();
    json(404, { error: `no route ${req.method} ${path}` });
  }

  /** Reads the activations, checks them against the header, and queues the request. */
  private async accept(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let meta: StageRequestMeta;
    let bytes = 0;
    try {
      meta = parseMeta(req.headers[STAGE_HEADER] as string | undefined, this.pipeline.stages, this.stage);
      for await (const chunk of req) bytes += (chunk as Buffer).length;
    } catch (err) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: (err as Error).message }));
      return;
    }
    const want = this.stage === 0 ? 0 : this.pipeline.activationBytes(meta.promptTokens, meta.outputTokens);
    if (bytes !== want) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: `stage ${this.stage} expects ${want} bytes of activations for ${meta.promptTokens}+${meta.outputTokens} tokens, got ${bytes}` }));
      return;
    }
    if (!this.loaded || this.draining || this.closed) {
      res.writeHead(503, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: this.loaded ? "draining" : "loading" }));
      return;
    }
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    const job: Job = { meta, res, cancelled: false, forward: new AbortController() };
    this.active++;
    res.once("close", () => {
      this.active--;
      if (res.writableFinished) return;
      job.cancelled = true;
      job.forward.abort();
      const i = this.queue.indexOf(job);
      if (i >= 0) this.queue.splice(i, 1);
    });
    this.arrivals.push(this.o.clock.now());
    this.queue.push(job);
    this.dispatch();
  }

  /** Serves the queue's head when the replica is free: the stage's share of the request's work, then the hand-on. */
  private dispatch(): void {
    if (this.busy !== undefined || this.closed) return;
    const job = this.queue.shift();
    if (job === undefined) return;
    this.busy = job;
    const serviceMs = this.pipeline.stageMs(this.stage, job.meta.promptTokens, job.meta.outputTokens);
    this.o.clock.after(serviceMs, () => {
      this.busy = undefined;
      this.served++;
      this.services.push([this.o.clock.now(), serviceMs]);
      this.dispatch();
      if (!job.cancelled) void this.handOn(job);
    });
  }

  private fail(job: Job, message: string): void {
    if (job.res.writableEnded) return;
    job.res.end(JSON.stringify({ error: message }) + "\n");
  }

  /** The last stage writes the tokens; any other POSTs the activations to a next-stage replica and relays its stream. */
  private async handOn(job: Job): Promise<void> {
    const { meta, res } = job;
    if (meta.next.length === 0) {
      let out = "";
      for (let i = 0; i < meta.outputTokens; i++) out += JSON.stringify({ t: syntheticToken(meta.seed, i) }) + "\n";
      res.end(out + JSON.stringify({ done: true }) + "\n");
      return;
    }
    const need = this.pipeline.activationBytes(meta.promptTokens, meta.outputTokens);
    if (this.zeros.length < need) this.zeros = Buffer.alloc(need); // one zero-filled buffer, sliced for every hand-on
    const body = this.zeros.subarray(0, need);
    const header = JSON.stringify({ ...meta, next: meta.next.slice(1) });
    const candidates = [...meta.next[0]!].sort((a, b) => (this.outstanding.get(a) ?? 0) - (this.outstanding.get(b) ?? 0));
    const refused: string[] = [];
    for (const url of candidates) {
      if (job.cancelled) return;
      this.outstanding.set(url, (this.outstanding.get(url) ?? 0) + 1);
      let relaying = false;
      try {
        const r = await fetch(new URL("/tidegate/stage/run", url), { method: "POST", headers: { [STAGE_HEADER]: header, "content-type": "application/octet-stream" }, body, signal: job.forward.signal });
        if (r.status !== 200 || r.body === null) {
          refused.push(`${url}: ${r.status} ${(await r.text()).slice(0, 200)}`);
          continue;
        }
        relaying = true;
        for await (const chunk of r.body) {
          if (!res.write(chunk)) await new Promise((resolve) => res.once("drain", resolve));
        }
        res.end();
        return;
      } catch (err) {
        if (job.cancelled) return;
        // A stream that broke after it began is not retried elsewhere (its tokens may be half relayed).
        if (relaying) return this.fail(job, `stage ${this.stage + 1} at ${url} failed mid-stream: ${(err as Error).message}`);
        refused.push(`${url}: ${(err as Error).message}`);
      } finally {
        const n = (this.outstanding.get(url) ?? 1) - 1;
        if (n <= 0) this.outstanding.delete(url);
        else this.outstanding.set(url, n);
      }
    }
    this.fail(job, `stage ${this.stage + 1}: no replica took the request (${refused.join("; ")})`);
  }
}
