/**
 * The region's copy of the planner's hourly targets (DESIGN "Planner"; Dynamo's virtual connector acks). The latest
 * decision wins: `decisionId` is monotonic per planner leadership, so an older id is stale and not accepted; the
 * same id again (a retransmit) is acknowledged as accepted without replacing what is stored. The region controller
 * (region/controller/) reads `latest()` and subscribes with `onTargets`.
 */
import { TidegateError } from "../../core/errors.js";
import type { RegionName } from "../../core/models.js";
import type { RegionTargets, TargetsAck, Unsubscribe } from "../../core/ports.js";
import { silentLogger, type Logger } from "../../core/log.js";

/** Holds the newest accepted RegionTargets of one region and tells listeners when it changes. */
export class TargetsStore {
  private current: RegionTargets | undefined;
  private readonly listeners = new Set<(t: RegionTargets) => void>();

  constructor(
    readonly region: RegionName,
    private readonly log: Logger = silentLogger,
  ) {}

  /**
   * Accepts `targets` when its decisionId is newer than the stored one (listeners run synchronously, in order of
   * subscription; a listener that throws does not stop the others or the ack). Equal id: accepted, not re-stored.
   * Older id: `accepted: false`. Targets for another region are an invalid_request.
   */
  accept(targets: RegionTargets): TargetsAck {
    if (targets.region !== this.region) {
      throw new TidegateError("invalid_request", `targets for region ${JSON.stringify(targets.region)} sent to region ${JSON.stringify(this.region)}`, { param: "region" });
    }
    if (!Number.isSafeInteger(targets.decisionId) || targets.decisionId < 0) {
      throw new TidegateError("invalid_request", `decisionId must be a non-negative integer, got ${targets.decisionId}`, { param: "decisionId" });
    }
    const held = this.current?.decisionId;
    if (held !== undefined && targets.decisionId < held) return { region: this.region, decisionId: held, accepted: false };
    if (held === targets.decisionId) return { region: this.region, decisionId: held, accepted: true };
    this.current = targets;
    for (const listener of [...this.listeners]) {
      try {
        listener(targets);
      } catch (err) {
        // A listener bug must not turn an accepted plan into a failed ack; it is logged, not swallowed silently.
        this.log.error("targets listener failed", { decisionId: targets.decisionId, err });
      }
    }
    return { region: this.region, decisionId: targets.decisionId, accepted: true };
  }

  /** The newest accepted targets, or undefined before the first. */
  latest(): RegionTargets | undefined {
    return this.current;
  }

  /** Calls `listener` on every newly accepted decision (not with the current one). */
  onTargets(listener: (t: RegionTargets) => void): Unsubscribe {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
