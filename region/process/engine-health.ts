/**
 * Engine liveness for a static region (issue 15 item 1, issue 32 item 2): an engine that dies or hangs under a live
 * region stops being reported as serving within 2 s and comes back when it answers again; an engine that is merely
 * busy (its /metrics slow under load while it streams tokens) stays in service.
 *
 * Every `intervalMs` (Clock) each instance whose engine reports `healthy() === false` — the adapter's passive verdict
 * (openai-http: engines/openai-http/liveness.ts: its connection was refused or reset, or it owed bytes and sent
 * none for its stall limit; a slow scrape alone is not enough) — is moved from `serving` to `draining`: the gateway
 * stops routing to it and telemetry stops counting it, so the global router stops sending the model there when it
 * was the last one. When the engine says `true` again, an instance this watcher drained goes back to `serving`.
 * Instances drained by anyone else are left alone.
 *
 * Requests leave a down engine as fast as it stopped (issue 49 item 2): every engine whose verdict is false is told to
 * the gateway (`Gateway.engineDown`) at each pass, ejected or not — it takes no request, and every stream on it ends:
 * one without a first token is retried on another instance or, by the router, in another region; one with it ends
 * with a typed `upstream_error`. With the adapter's stall limit (1 s by default) and this check's period (250 ms), that
 * is within ~1.3 s of the engine stopping. The verdict counts the engine's silence in time this process was running
 * (liveness.ts), so the region's own pause blames no engine.
 *
 * At most `maxEjectedPercent` of the watched engines (rounded down, but at least one; 0: none) are held out of
 * service by this watcher at once (Envoy's max ejection percent): beyond it an unhealthy engine keeps its `serving`
 * state — one warning names it and why — and is drained once a slot frees. The cap bounds what is drained (the
 * instance states the listing, telemetry and the controller see), never where a request waits: a down engine it keeps
 * serving still takes no request. Pure over the Gateway and a Clock; no HTTP.
 */
import type { Clock, Timer } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { Engine } from "../../core/ports.js";
import type { Gateway } from "../gateway/gateway.js";

export interface EngineHealthOptions {
  /** How often the engines are checked (default 250 ms). */
  intervalMs?: number;
  /** Share of the watched engines that may be out of service for health at once, 0–100 (default 50). */
  maxEjectedPercent?: number;
}

export interface EngineHealthWatch {
  /** Instance ids this watcher holds drained now. */
  readonly down: ReadonlySet<string>;
  /** Instance ids whose engines are unhealthy but kept serving because the ejection cap is reached. */
  readonly held: ReadonlySet<string>;
  /** One pass now (the timer calls it). */
  check(): void;
  stop(): void;
}

/** How many of `total` engines may be ejected at once under `maxEjectedPercent` (0–100): at least one unless 0. */
export function maxEjected(total: number, maxEjectedPercent: number): number {
  if (maxEjectedPercent <= 0 || total <= 0) return 0;
  return Math.max(1, Math.floor((total * maxEjectedPercent) / 100));
}

/** Starts watching `engines` (those added to `gateway`). */
export function watchEngineHealth(
  gateway: Pick<Gateway, "instances" | "setInstanceState" | "engineDown" | "engineUp">,
  engines: readonly Engine[],
  clock: Clock,
  log: Logger,
  opts: EngineHealthOptions = {},
): EngineHealthWatch {
  const pct = opts.maxEjectedPercent ?? 50;
  if (!(pct >= 0 && pct <= 100)) throw new RangeError(`maxEjectedPercent must be within 0–100, got ${pct}`);
  const down = new Set<string>();
  const held = new Set<string>();
  const check = () => {
    const states = new Map(gateway.instances().map((i) => [i.instanceId, i.state]));
    const watched = engines.filter((e) => states.has(e.instanceId));
    const verdicts = watched.map((e) => ({ e, h: e.healthy?.(), state: states.get(e.instanceId)! }));
    // Recoveries first, so the slots they free serve this pass's ejections.
    for (const { e, h, state } of verdicts) {
      if (h !== false) gateway.engineUp(e.instanceId);
      if (h === true && down.has(e.instanceId)) {
        down.delete(e.instanceId);
        if (state === "draining") {
          gateway.setInstanceState(e.instanceId, "serving");
          log.info("engine answers again; instance back in service", { instanceId: e.instanceId });
        }
      }
      if (h !== false) held.delete(e.instanceId);
    }
    const cap = maxEjected(watched.length, pct);
    for (const { e, h, state } of verdicts) {
      if (h !== false) continue;
      const reason = e.unhealthyReason?.() ?? "engine reports unhealthy";
      // Whatever the cap says: no request waits on it (its streams end, the unstarted ones retried elsewhere).
      const ended = gateway.engineDown(e.instanceId, reason);
      if (ended > 0) log.warn("engine down: its requests in flight ended (those without a first token retried elsewhere)", { instanceId: e.instanceId, reason, requests: ended });
      if (state !== "serving" || down.has(e.instanceId)) continue;
      if (down.size < cap) {
        gateway.setInstanceState(e.instanceId, "draining");
        down.add(e.instanceId);
        held.delete(e.instanceId);
        log.warn("engine down; instance taken out of service", { instanceId: e.instanceId, reason });
      } else if (!held.has(e.instanceId)) {
        held.add(e.instanceId);
        log.warn("engine down but kept serving: the region's ejection cap is reached (it takes no request meanwhile)", { instanceId: e.instanceId, reason, ejected: down.size, maxEjected: cap, maxEjectedPercent: pct });
      }
    }
  };
  const timer: Timer = clock.every(opts.intervalMs ?? 250, check);
  return { down, held, check, stop: () => timer.cancel() };
}
