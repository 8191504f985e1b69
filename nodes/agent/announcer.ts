/**
 * The agent's announcer: calls the region's AgentRegistry.Announce every `intervalMs` with the node's current
 * announcement. It never throws: it logs once when the region becomes unreachable (warn) and once when it answers
 * again (info), and logs the region's message whenever `known` or the message changes. Calls never overlap.
 */
import type { Clock, Timer } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { NodeAnnouncement } from "./handle.js";
import type { AnnounceReply } from "./agent-registry.js";

/** How to announce: what (`announcement`), where (`send`, e.g. RegistryClient.announce) and how often. */
export interface AnnouncerOptions {
  /** The region's address, for log lines. */
  regionAddress: string;
  intervalMs: number;
  clock: Clock;
  log: Logger;
  announcement: () => NodeAnnouncement;
  /** One call; rejects when the region is unreachable or refuses. */
  send: (a: NodeAnnouncement) => Promise<AnnounceReply>;
}

/** Announces every interval from start() until stop(); the first call is immediate. */
export class Announcer {
  private timer: Timer | undefined;
  private stopped = true;
  private reachable: boolean | undefined;
  private lastReply = "";
  private inFlight: Promise<void> | undefined;
  /** Whether the last announce was answered: undefined before the first answer or failure. */
  get regionReachable(): boolean | undefined {
    return this.reachable;
  }

  /** Announce calls answered / failed so far. */
  answered = 0;
  failed = 0;

  constructor(private readonly o: AnnouncerOptions) {
    if (!(Number.isInteger(o.intervalMs) && o.intervalMs > 0)) throw new RangeError(`intervalMs must be a positive integer, got ${o.intervalMs}`);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.tick();
  }

  /** Stops announcing and waits for a call in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.inFlight;
  }

  private tick(): void {
    if (this.stopped) return;
    this.inFlight = this.once().finally(() => {
      this.inFlight = undefined;
      if (!this.stopped) this.timer = this.o.clock.after(this.o.intervalMs, () => this.tick());
    });
  }

  private async once(): Promise<void> {
    const region = this.o.regionAddress;
    try {
      const r = await this.o.send(this.o.announcement());
      this.answered++;
      if (this.reachable !== true) this.o.log.info(this.reachable === false ? "region reachable again" : "announced to region", { region, known: r.known });
      this.reachable = true;
      const key = `${r.known} ${r.message}`;
      if (key !== this.lastReply && (!r.known || r.message !== "")) this.o.log[r.known ? "info" : "warn"]("region replied", { region, known: r.known, message: r.message });
      this.lastReply = key;
    } catch (err) {
      this.failed++;
      if (this.reachable !== false) this.o.log.warn("region unreachable; announcing again every interval", { region, intervalMs: this.o.intervalMs, err });
      this.reachable = false;
    }
  }
}
