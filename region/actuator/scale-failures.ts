/**
 * The `agents` actuator's recent scaling failures, for the admin listing: the newest `MAX_FAILURES` (50), oldest
 * first. `report` keeps one found elsewhere (the controller has nowhere to put an instance); `fail` also logs it.
 */
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { ScaleFailure } from "./port.js";

const MAX_FAILURES = 50;

export class ScaleFailures {
  /** Oldest first; the array is kept (and trimmed) in place. */
  readonly entries: ScaleFailure[] = [];

  constructor(private readonly o: { clock: Clock; log: Logger }) {}

  /** Keeps a failure for the listing, stamped now. */
  report(f: Omit<ScaleFailure, "atMs">): void {
    const entry: ScaleFailure = { atMs: this.o.clock.now(), ...f };
    this.entries.push(entry);
    if (this.entries.length > MAX_FAILURES) this.entries.shift();
  }

  /** Keeps a failure of this actuator's own work and logs it ("scaling failed"). */
  fail(f: Omit<ScaleFailure, "atMs">): void {
    this.report(f);
    this.o.log.error("scaling failed", { ...f });
  }
}
