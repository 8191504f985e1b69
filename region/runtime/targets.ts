/**
 * The region's copy of the planner's hourly targets (DESIGN "Planner"; Dynamo's virtual connector acks) and the one
 * `decisionId` rule of the whole region. The region controller does not accept plans itself: it subscribes here.
 *
 * The rule, for a plan `t` when the region holds decision `held` (0 before any):
 * - `t.region` is another region → `invalid_request` (thrown; the link turns it into an error status).
 * - `t.decisionId` is not a non-negative safe integer → `invalid_request`.
 * - `t.decisionId < held` → stale: `{ accepted: false, decisionId: held }`, nothing changes.
 * - `t.decisionId === held` → a retransmit: `{ accepted: true, decisionId: held }`, nothing is re-stored and no
 *   listener runs (so a restart of the sender cannot make the controller act twice).
 * - `t.decisionId > held`, advisory → acknowledged (`accepted: true`) and held as `latestAdvisory()`; `held` moves
 *   to it (ids are monotonic per planner leadership) but the acting plan (`latest()`) is unchanged and no listener
 *   runs: advisory plans are published for people, never acted on.
 * - `t.decisionId > held`, not advisory → stored as `latest()`, listeners run, acknowledged.
 */
import { TidegateError } from "../../core/errors.js";
import type { RegionName } from "../../core/models.js";
import type { RegionTargets, TargetsAck, Unsubscribe } from "../../core/ports.js";
import { silentLogger, type Logger } from "../../core/log.js";

/** Holds the newest accepted RegionTargets of one region and tells listeners when the acting plan changes. */
export class TargetsStore {
  private current: RegionTargets | undefined;
  private advisory: RegionTargets | undefined;
  private held = 0;
  private readonly listeners = new Set<(t: RegionTargets) => void>();

  constructor(
    readonly region: RegionName,
    private readonly log: Logger = silentLogger,
  ) {}

  /** The newest decision id acknowledged (acting or advisory); 0 before any. */
  get decisionId(): number {
    return this.held;
  }

  /**
   * Applies the rule in the file comment. Listeners run synchronously, in order of subscription; a listener that
   * throws is logged and does not stop the others or the ack.
   */
  accept(targets: RegionTargets): TargetsAck {
    if (targets.region !== this.region) {
      throw new TidegateError("invalid_request", `targets for region ${JSON.stringify(targets.region)} sent to region ${JSON.stringify(this.region)}`, { param: "region" });
    }
    if (!Number.isSafeInteger(targets.decisionId) || targets.decisionId < 0) {
      throw new TidegateError("invalid_request", `decisionId must be a non-negative integer, got ${targets.decisionId}`, { param: "decisionId" });
    }
    if (targets.decisionId < this.held) return { region: this.region, decisionId: this.held, accepted: false };
    if (targets.decisionId === this.held && (this.current !== undefined || this.advisory !== undefined)) return { region: this.region, decisionId: this.held, accepted: true };
    this.held = targets.decisionId;
    if (targets.advisory) {
      this.advisory = targets;
      this.log.info("advisory plan acknowledged (not acted on)", { decisionId: targets.decisionId });
      return { region: this.region, decisionId: targets.decisionId, accepted: true };
    }
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

  /** The newest accepted plan to act on (never an advisory one), or undefined before the first. */
  latest(): RegionTargets | undefined {
    return this.current;
  }

  /** The newest advisory plan acknowledged, if it is newer than the acting one. */
  latestAdvisory(): RegionTargets | undefined {
    return this.advisory !== undefined && this.advisory.decisionId > (this.current?.decisionId ?? -1) ? this.advisory : undefined;
  }

  /** Calls `listener` on every newly accepted acting plan (not with the current one, never with advisory ones). */
  onTargets(listener: (t: RegionTargets) => void): Unsubscribe {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
