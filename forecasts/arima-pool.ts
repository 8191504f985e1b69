/**
 * A small pool of worker threads that run the `arima` package (DESIGN "Forecast": it is synchronous, blocks, and
 * crashes on long series, so it never runs on the event loop). Each job fits one model and predicts `horizonSteps`.
 *
 * The worker is JavaScript source evaluated in the thread (`eval: true`), with the `arima` module path resolved here
 * and passed in: that works the same from dist/ (compiled) and under vitest (TypeScript source), with no worker file
 * to locate. A job that throws inside the wasm (e.g. "memory access out of bounds") rejects; a job that exceeds
 * `jobTimeoutMs`, or a worker that exits, rejects its job and the worker is replaced.
 */
import { Worker } from "node:worker_threads";
import { createRequire } from "node:module";

/** Options passed to `new ARIMA(options)` (see the arima package README). */
export interface ArimaOrder {
  p: number;
  d: number;
  q: number;
  P: number;
  D: number;
  Q: number;
  s: number;
  /** Estimation: 0 exact maximum likelihood (the package's default), 1 conditional sum of squares, 2 Box-Jenkins. */
  method?: number;
}

/** One fit: the order, the (already transformed) series, and how many steps to predict. */
export interface ArimaJob {
  order: ArimaOrder;
  values: number[];
  horizonSteps: number;
}

/** Raw predictions and their forecast error variances, one per horizon step (unvalidated). */
export interface ArimaResult {
  mean: number[];
  variance: number[];
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
// The wasm prints diagnostics ("non-stationary AR part"): silence this thread's output before the module binds it.
// (Capturing it as piped stdio instead kept the parent process alive after its work ended, unref or not.)
const quiet = () => true;
process.stdout.write = quiet;
process.stderr.write = quiet;
console.log = console.info = console.warn = console.error = console.debug = () => {};
const ARIMA = require(workerData.arimaPath);
parentPort.on("message", (job) => {
  let model;
  try {
    model = new ARIMA({ ...job.order, verbose: false }).train(job.values);
    const [mean, variance] = model.predict(job.horizonSteps);
    parentPort.postMessage({ id: job.id, mean: Array.from(mean), variance: Array.from(variance) });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: String(err && err.message ? err.message : err) });
  } finally {
    try { if (model && model.destroy) model.destroy(); } catch (e) { /* the wasm may be unusable after a crash */ }
  }
});
`;

interface Pending {
  id: number;
  job: ArimaJob;
  resolve: (r: ArimaResult) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  current?: Pending;
  timer?: NodeJS.Timeout;
}

type WorkerReply = { id: number; mean: number[]; variance: number[] } | { id: number; error: string };

/** Pool size and the per-job time limit. */
export interface ArimaPoolOptions {
  /** Worker threads (default 2: the machines here have 2 cores). */
  workers?: number;
  /** A job running longer than this is abandoned and its worker replaced (default 30 s). */
  jobTimeoutMs?: number;
}

/** Runs ARIMA fits on worker threads, one job per worker at a time, FIFO. */
export class ArimaPool {
  private readonly arimaPath = createRequire(import.meta.url).resolve("arima");
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 1;
  private closed = false;
  private readonly jobTimeoutMs: number;
  /** Workers replaced after a crash or timeout (for tests and reports). */
  restarts = 0;

  constructor(options: ArimaPoolOptions = {}) {
    const n = options.workers ?? 2;
    if (!(n >= 1 && Number.isInteger(n))) throw new RangeError(`workers must be an integer ≥ 1, got ${n}`);
    this.jobTimeoutMs = options.jobTimeoutMs ?? 30_000;
    for (let i = 0; i < n; i++) this.slots.push(this.spawn());
  }

  /** Fits and predicts; rejects with the worker's error message on a crash, exit or timeout. */
  run(job: ArimaJob): Promise<ArimaResult> {
    if (this.closed) return Promise.reject(new Error("ArimaPool is closed"));
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, job, resolve, reject });
      this.pump();
    });
  }

  /** Terminates every worker; queued jobs reject. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.queue.splice(0)) p.reject(new Error("ArimaPool closed"));
    await Promise.all(
      this.slots.map(async (s) => {
        if (s.timer) clearTimeout(s.timer);
        s.current?.reject(new Error("ArimaPool closed"));
        s.current = undefined;
        await s.worker.terminate();
      }),
    );
  }

  private spawn(): Slot {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { arimaPath: this.arimaPath } });
    const slot: Slot = { worker };
    worker.on("message", (msg: WorkerReply) => {
      const cur = slot.current;
      if (cur === undefined || cur.id !== msg.id) return;
      this.finish(slot);
      if ("error" in msg) {
        cur.reject(new Error(`arima: ${msg.error}`));
        // A wasm trap (e.g. "memory access out of bounds") leaves the module's heap unusable: replace the worker.
        this.replace(slot);
        return;
      }
      cur.resolve({ mean: msg.mean, variance: msg.variance });
      this.pump();
    });
    const onDeath = (why: string) => {
      const cur = slot.current;
      this.finish(slot);
      if (this.closed) return;
      cur?.reject(new Error(`arima worker ${why}`));
      this.replace(slot);
    };
    worker.on("error", (err) => onDeath(`crashed: ${err.message}`));
    worker.on("exit", (code) => onDeath(`exited with code ${code}`));
    // An idle pool never keeps the process alive: unref after the listeners (adding a "message" listener refs the
    // worker again), and no piped stdio (the worker silences its own output, WORKER_SOURCE).
    worker.unref();
    return slot;
  }

  private replace(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i === -1) return;
    slot.worker.removeAllListeners();
    void slot.worker.terminate();
    this.restarts++;
    this.slots[i] = this.spawn();
    this.pump();
  }

  private finish(slot: Slot): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.current = undefined;
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (slot.current !== undefined) continue;
      const next = this.queue.shift();
      if (next === undefined) return;
      slot.current = next;
      slot.timer = setTimeout(() => {
        const cur = slot.current;
        this.finish(slot);
        cur?.reject(new Error(`arima job timed out after ${this.jobTimeoutMs} ms`));
        this.replace(slot);
      }, this.jobTimeoutMs);
      slot.worker.postMessage({ id: next.id, ...next.job });
    }
  }
}
