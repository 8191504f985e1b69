/**
 * The replicas of a pipelined instance as stage processes on node agents: the `StageFleet` a `KeyStageScaler` acts on
 * when every replica is its own engine process (stage-server.ts), in place of `PipelineSim`'s replicas in one
 * process. The scaler picks the node (placement.ts: cache-aware when GPUs are plentiful, KL dispersion of key
 * replicas under contention, QUART §4.3 / §6.2 Eq. 8–10) and the start time (cache.ts: a host-memory hit, §6.1);
 * this fleet asks that node's agent to start `tidegate engine-sim --stage` on one GPU slot (StartEngine's `stage`),
 * waits for its `/health`, and from then on routes requests to it. A removed replica leaves new routes at once; once
 * no request in flight names it, it is drained (`/tidegate/stage/drain`) and its process stops when idle; the GPU goes
 * back to the scaler.
 *
 * A serving replica that misses 3 polls in a row (its process died) is lost: out of the routes, stopped, its GPU back
 * to the scaler, whose next pass starts another where a stage falls below its keep.
 *
 * Observations come from polling every replica's `GET /tidegate/stage` every `pollMs` (model ms): arrivals and
 * completions in the window (as ages, mapped onto this fleet's clock), queue, busy. Stage processes run on the
 * region's wall clock dilated by the same time scale as this fleet's clock, so their model ms and ours agree.
 */
import type { Clock, Timer } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import { interArrivalCv } from "./cv.js";
import type { StageObservation } from "./pipeline.js";
import type { Removed } from "./pipeline.js";
import type { StageFleet } from "./scaler.js";
import { stageSpecJson, type StageStatus } from "./stage-server.js";
import type { Pipeline } from "./stages.js";

/** The StartEngine of a stage process (a subset of nodes/agent/handle.ts EngineSpec). */
export interface StageEngineSpec {
  instanceId: string;
  model: string;
  gpu: string;
  gpus: number;
  timeScale?: number;
  startTimeoutMs?: number;
  /** engine-sim --stage JSON (stage-server.ts StageProcessSpec). */
  stage: string;
}

/**
 * What the fleet needs of a node agent (nodes/agent/handle.ts AgentHandle has it; declared here so that keystage
 * does not import the agent folder, which imports keystage).
 */
export interface StageHost {
  readonly nodeId: string;
  startEngine(spec: StageEngineSpec): Promise<{ url: string; pid: number; state: string; detail: string }>;
  stopEngine(instanceId: string, graceMs: number): Promise<unknown>;
}

/** One stage process and what the fleet knows of it. */
export interface StageReplica {
  readonly id: number;
  readonly stage: number;
  /** Index of its node in `hosts`. */
  readonly server: number;
  readonly nodeId: string;
  /** The engine id on its agent: `stage/<instance id>/<stage>/<replica id>`. */
  readonly engineId: string;
  url: string;
  pid: number;
  state: "starting" | "serving" | "draining" | "stopped";
  status: StageStatus | undefined;
  /**
   * Requests in flight at the head whose route names this replica (stage 0: the ones sent to it; a later stage: the
   * ones that list it as a candidate). A removed replica is stopped only once none is left, so no request meets it gone.
   */
  captured: number;
  /** Status polls in a row it did not answer (LOST_AFTER_MISSES: lost). */
  misses: number;
}

/** A serving replica that misses this many status polls in a row is taken as lost and replaced by the scaler. */
const LOST_AFTER_MISSES = 3;

/** Wiring of a `ProcessStageFleet`. */
export interface ProcessStageFleetOptions {
  instanceId: string;
  model: string;
  gpu: string;
  pipeline: Pipeline;
  /** The region's node agents; a replica's `server` indexes this list. */
  hosts: readonly StageHost[];
  /** Model time (the head's, dilated by `timeScale`). */
  clock: Clock;
  /** engine-sim --time-scale of the stage processes (the same dilation as `clock`). */
  timeScale: number;
  windowMs: number;
  /** How often replicas are polled (model ms). */
  pollMs: number;
  /** Called at every poll (the head refreshes its view of the nodes). */
  onPoll?: () => void;
  /** Wall ms a stage process may take to print its URL (StartEngine start_timeout_ms). */
  startTimeoutMs?: number;
  /** A replica ended (stopped after a drain, or never started): its GPU goes back. */
  onStopped: (r: StageReplica) => void;
  log: Logger;
}

/** Stage processes on agents, as a StageFleet; see the module comment. */
export class ProcessStageFleet implements StageFleet {
  private readonly byStage: StageReplica[][];
  private nextId = 0;
  private readonly startMs: number;
  private readonly poller: Timer;
  /** Last mean service time seen per stage (kept when the window holds no completion). */
  private readonly lastMeanMs: (number | undefined)[];
  private closed = false;
  /** Resolvers waiting for every stage to have a serving replica. */
  private waiters: (() => void)[] = [];

  constructor(private readonly o: ProcessStageFleetOptions) {
    this.byStage = Array.from({ length: o.pipeline.stages }, () => []);
    this.lastMeanMs = this.byStage.map(() => undefined);
    this.startMs = o.clock.now();
    this.poller = o.clock.every(o.pollMs, () => void this.poll());
  }

  /** Every replica not stopped, stage by stage. */
  all(): StageReplica[] {
    return this.byStage.flat();
  }

  replicas(stage: number): StageReplica[] {
    return this.byStage[stage]!.filter((r) => r.state === "starting" || r.state === "serving");
  }

  /** The serving replicas of each stage: a new request's route (the caller counts it in each one's `captured`). */
  route(): StageReplica[][] {
    return this.byStage.map((rs) => rs.filter((r) => r.state === "serving"));
  }

  /** True when every stage has a serving replica. */
  get complete(): boolean {
    return this.byStage.every((rs) => rs.some((r) => r.state === "serving"));
  }

  /** Resolves once every stage has a serving replica (at once if it does), or rejects after `timeoutMs` model ms. */
  whenComplete(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.complete) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = this.o.clock.after(timeoutMs, () => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`not every stage of ${this.o.instanceId} has a serving replica after ${timeoutMs} ms`));
      });
      const done = () => {
        timer.cancel();
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        timer.cancel();
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(done);
    });
  }

  addReplica(stage: number, server: number, delayMs: number): StageReplica {
    const host = this.o.hosts[server]!;
    const id = this.nextId++;
    const r: StageReplica = { id, stage, server, nodeId: host.nodeId, engineId: `stage/${this.o.instanceId}/${stage}/${id}`, url: "", pid: 0, state: "starting", status: undefined, captured: 0, misses: 0 };
    this.byStage[stage]!.push(r);
    void this.start(r, host, delayMs);
    return r;
  }

  private async start(r: StageReplica, host: StageHost, loadMs: number): Promise<void> {
    const p = this.o.pipeline.layout;
    const stage = stageSpecJson({ layersPerStage: p.layersPerStage, profileTp: p.profileTp, hiddenSize: p.hiddenSize, stage: r.stage, loadMs, windowMs: this.o.windowMs });
    try {
      const info = await host.startEngine({ instanceId: r.engineId, model: this.o.model, gpu: this.o.gpu, gpus: 1, timeScale: this.o.timeScale, ...(this.o.startTimeoutMs === undefined ? {} : { startTimeoutMs: this.o.startTimeoutMs }), stage });
      if (info.state === "exited") throw new Error(info.detail);
      r.url = info.url;
      r.pid = info.pid;
      this.o.log.info("stage process started", { engine: r.engineId, node: r.nodeId, url: r.url, pid: r.pid, loadMs: Math.round(loadMs) });
      // Serving once /health says its parameters are on the GPU (loadMs model ms after it started).
      while (r.state === "starting" && !this.closed) {
        const ok = await fetch(new URL("/health", r.url), { signal: AbortSignal.timeout(2000) }).then(
          async (res) => {
            await res.body?.cancel();
            return res.status === 200;
          },
          () => false,
        );
        if (ok && r.state === "starting") {
          r.state = "serving";
          this.wake();
          break;
        }
        await this.o.clock.sleep(Math.max(1, Math.min(this.o.pollMs, loadMs / 4)));
      }
      if (r.state === "draining") await this.retire(r);
    } catch (err) {
      this.o.log.warn("stage process did not start", { engine: r.engineId, node: r.nodeId, err: (err as Error).message });
      await host.stopEngine(r.engineId, 0).catch(() => undefined);
      this.drop(r);
    }
  }

  private wake(): void {
    if (!this.complete) return;
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /** A starting replica first, else an idle serving one, else the most recent one drains. */
  /**
   * Removes one replica of `stage` in the order of scaler.ts `StageFleet.removeReplica` (`startingFirst`: starting,
   * idle, busy; otherwise idle, busy, starting). Idle: serving, its last poll saw no request and none in flight names
   * it; busy: the most recent other serving one (it drains).
   */
  removeReplica(stage: number, startingFirst = true): Removed | undefined {
    const live = this.replicas(stage);
    const starting = live.find((r) => r.state === "starting");
    const serving = live.filter((r) => r.state === "serving");
    const idle = serving.find((r) => r.status !== undefined && r.status.active === 0 && r.captured === 0);
    const busy = serving.at(-1);
    const pick = startingFirst ? (starting ?? idle ?? busy) : (idle ?? busy ?? starting);
    if (pick === undefined) return undefined;
    const wasStarting = pick.state === "starting";
    pick.state = "draining";
    // A starting replica is retired by `start` once its process is up (or failed); a serving one drains now.
    if (!wasStarting) void this.retire(pick);
    return pick === idle ? "idle" : wasStarting ? "starting" : "busy";
  }

  /**
   * Retires a removed replica: no new route names it (it is not serving); once no request in flight names it, it is
   * drained (a late request would get 503), and once it holds none its process stops and its GPU goes back.
   */
  private async retire(r: StageReplica): Promise<void> {
    const host = this.o.hosts[r.server]!;
    try {
      while (r.captured > 0 && !this.closed) await this.o.clock.sleep(this.o.pollMs);
      await fetch(new URL("/tidegate/stage/drain", r.url), { method: "POST", signal: AbortSignal.timeout(2000) }).then((res) => res.body?.cancel());
      for (;;) {
        if (this.closed) break;
        const st = await this.fetchStatus(r);
        if (st === undefined || st.active === 0) break;
        await this.o.clock.sleep(this.o.pollMs);
      }
    } catch {
      // unreachable: stop it anyway
    }
    await host.stopEngine(r.engineId, 3000).catch((err: unknown) => this.o.log.warn("stage process stop failed", { engine: r.engineId, err: (err as Error).message }));
    this.o.log.info("stage process stopped", { engine: r.engineId, node: r.nodeId });
    this.drop(r);
  }

  /** A serving replica that stopped answering (its process died or hangs): out of the routes, stopped, its GPU back. */
  private async lose(r: StageReplica): Promise<void> {
    this.o.log.warn("stage process lost", { engine: r.engineId, node: r.nodeId, url: r.url, pid: r.pid, misses: r.misses });
    r.state = "draining";
    await this.o.hosts[r.server]!.stopEngine(r.engineId, 0).catch(() => undefined);
    this.drop(r);
  }

  private drop(r: StageReplica): void {
    if (r.state === "stopped") return;
    r.state = "stopped";
    const rs = this.byStage[r.stage]!;
    rs.splice(rs.indexOf(r), 1);
    this.o.onStopped(r);
  }

  private async fetchStatus(r: StageReplica): Promise<StageStatus | undefined> {
    if (r.url === "") return undefined;
    try {
      const res = await fetch(new URL("/tidegate/stage", r.url), { signal: AbortSignal.timeout(2000) });
      if (res.status !== 200) {
        await res.body?.cancel();
        return undefined;
      }
      const st = (await res.json()) as StageStatus;
      r.status = st;
      return st;
    } catch {
      return undefined;
    }
  }

  private polling = false;

  private async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.o.onPoll?.();
    this.polling = true;
    try {
      await Promise.all(
        this.all()
          .filter((r) => r.state === "serving" || r.state === "draining")
          .map(async (r) => {
            const st = await this.fetchStatus(r);
            r.misses = st === undefined ? r.misses + 1 : 0;
            if (r.misses >= LOST_AFTER_MISSES && r.state === "serving") await this.lose(r);
          }),
      );
    } finally {
      this.polling = false;
    }
  }

  observe(): StageObservation[] {
    const now = this.o.clock.now();
    const from = now - this.o.windowMs;
    return this.byStage.map((rs, s) => {
      const arrivals: number[] = [];
      const services: number[] = [];
      let queue = 0;
      let busy = 0;
      for (const r of rs) {
        const st = r.status;
        if (st === undefined) continue;
        for (const ago of st.arrivalsAgoMs) if (now - ago >= from) arrivals.push(now - ago);
        for (const [ago, d] of st.servicesAgoMs) if (now - ago >= from) services.push(d);
        queue += st.queue;
        busy += st.busy;
      }
      arrivals.sort((a, b) => a - b);
      const n = services.length;
      const mean = n === 0 ? this.lastMeanMs[s] : services.reduce((a, b) => a + b, 0) / n;
      this.lastMeanMs[s] = mean;
      const sd = n < 2 || mean === undefined ? 0 : Math.sqrt(Math.max(0, services.reduce((a, d) => a + d * d, 0) / n - mean * mean));
      return {
        arrivals: arrivals.length,
        windowMs: Math.min(this.o.windowMs, now - this.startMs),
        arrivalCv: interArrivalCv(arrivals),
        meanServiceMs: mean,
        serviceCv: mean === undefined || mean <= 0 ? 0 : sd / mean,
        queue,
        serving: rs.filter((r) => r.state === "serving").length,
        starting: rs.filter((r) => r.state === "starting").length,
        draining: rs.filter((r) => r.state === "draining").length,
        busy,
      };
    });
  }

  /** Stops every stage process (SIGTERM) and waits for them. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.poller.cancel();
    await Promise.all(
      this.all().map(async (r) => {
        await this.o.hosts[r.server]!.stopEngine(r.engineId, 3000).catch(() => undefined);
        r.state = "stopped";
      }),
    );
  }
}
