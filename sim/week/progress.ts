/**
 * A progress bar on stderr for long replays: fraction of virtual time done, requests so far and requests per
 * wall second. Redraws at most every `minIntervalMs` of wall time; `done()` ends the line.
 */
export class ProgressBar {
  private lastDrawMs = 0;
  private readonly startMs = performance.now();

  constructor(
    private readonly label: string,
    private readonly out: NodeJS.WritableStream = process.stderr,
    private readonly minIntervalMs = 1000,
  ) {}

  /** Draws the bar for `fraction` ∈ [0, 1] and `requests` processed. */
  update(fraction: number, requests: number): void {
    const now = performance.now();
    if (now - this.lastDrawMs < this.minIntervalMs) return;
    this.lastDrawMs = now;
    this.out.write(`\r${this.line(fraction, requests, now)}`);
  }

  done(requests: number): void {
    this.out.write(`\r${this.line(1, requests, performance.now())}\n`);
  }

  private line(fraction: number, requests: number, now: number): string {
    const width = 30;
    const f = Math.max(0, Math.min(1, fraction));
    const fill = Math.round(f * width);
    const wallS = (now - this.startMs) / 1000;
    const rate = wallS > 0 ? Math.round(requests / wallS) : 0;
    return `${this.label} [${"#".repeat(fill)}${"-".repeat(width - fill)}] ${(f * 100).toFixed(1).padStart(5)}%  ${requests.toLocaleString("en")} req  ${rate.toLocaleString("en")} req/s wall  ${wallS.toFixed(0)} s`;
  }
}
