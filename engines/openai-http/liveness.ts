/**
 * Passive liveness of one engine as its adapter sees it (issue 32 item 2): an engine that sends bytes is alive, however
 * slow its /metrics answers under load. Only two verdicts say it is down (Envoy's outlier detection: errors, not
 * slowness):
 * - a connection failure: the last connection to it was refused or reset (ECONNREFUSED, ECONNRESET, EPIPE, …),
 *   until it sends a byte again;
 * - a stall: it owes something (a stream in flight, a scrape under way, or the last scrape timed out) and has sent no
 *   byte — no token, no header, no /metrics text — for `stallMs`, counted from its last byte or from when it began to
 *   owe, whichever is later.
 * A scrape that timed out while tokens flowed is neither: the adapter keeps the last scraped stats, marked stale.
 * The silence is counted in time this process was running (issue 49 item 3; `awakeMsSince`, core/loop-pauses.ts): a
 * region that was itself paused (a long task, a busy host, SIGSTOP) finds bytes waiting unread when it resumes, and
 * its health check may run before they are read — its own pause is not the engine's silence.
 * Pure over a Clock; the adapter reports what happens on its sockets.
 */
import { awakeMsSince, type Clock } from "../../core/clock.js";

/** Node's socket error codes that mean the engine refused or dropped the connection (not a slow answer). */
const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ECONNABORTED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENOTCONN"]);

/** The connection-failure code of `err` (or of its `cause` chain), undefined for any other error (a timeout, an abort). */
export function connectionFailureCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECTION_CODES.has(code)) return code;
  }
  return undefined;
}

/** true: alive; false: down, with `reason`; undefined: nothing known yet (no answer or failure so far). */
export interface LivenessVerdict {
  alive: boolean | undefined;
  /** Why it is down (only when `alive` is false), e.g. "connection refused (ECONNREFUSED)". */
  reason?: string;
}

export class EngineLiveness {
  /** Streams and scrapes under way. */
  private outstanding = 0;
  private scrapeTimedOut = false;
  /** Clock ms of the last byte, or of the moment the engine began to owe one, whichever is later. */
  private lastSignMs: number;
  private failure: string | undefined;
  private known = false;

  /** `stallMs` ≥ 1: how long an engine that owes bytes may send none before it counts as stalled. */
  constructor(private readonly clock: Clock, readonly stallMs: number) {
    if (!(stallMs >= 1)) throw new RangeError(`stallMs must be ≥ 1, got ${stallMs}`);
    this.lastSignMs = clock.now();
  }

  private get owing(): boolean {
    return this.outstanding > 0 || this.scrapeTimedOut;
  }

  /** A stream or scrape starts: the stall clock starts now unless the engine already owes bytes. */
  begin(): void {
    if (!this.owing) this.lastSignMs = this.clock.now();
    this.outstanding++;
  }

  /** A stream or scrape that `begin` counted ended (any way). */
  end(): void {
    if (this.outstanding > 0) this.outstanding--;
  }

  /** Bytes arrived from the engine (headers or body, of a stream or a scrape): alive now. Hot path: one clock read. */
  bytes(): void {
    this.lastSignMs = this.clock.now();
    this.failure = undefined;
    this.known = true;
  }

  /** A whole /metrics answer came back (any status). */
  scrapeAnswered(): void {
    this.scrapeTimedOut = false;
    this.bytes();
  }

  /** A scrape got no answer within its timeout: a stall once no byte came for `stallMs`, not before. */
  scrapeTimeout(): void {
    this.scrapeTimedOut = true;
    this.known = true;
  }

  /** A connection to the engine was refused or reset (`code`, e.g. ECONNREFUSED): down until it sends a byte. */
  connectionFailed(code: string): void {
    this.failure = code;
    this.known = true;
  }

  /** The verdict now. */
  verdict(): LivenessVerdict {
    if (this.failure !== undefined) return { alive: false, reason: `connection ${this.failure === "ECONNREFUSED" ? "refused" : "failed"} (${this.failure})` };
    const quietMs = awakeMsSince(this.clock, this.lastSignMs);
    if (this.owing && quietMs >= this.stallMs) {
      const what = this.outstanding > 0 ? `${this.outstanding} request(s) or scrape(s) in flight` : "its last /metrics scrape timed out";
      return { alive: false, reason: `stalled: no byte for ${Math.round(quietMs)} ms while ${what}` };
    }
    return { alive: this.known ? true : undefined };
  }
}
