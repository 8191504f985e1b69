/**
 * The replica corrector's PID controller (QUART §5.1, Eq. 2–3; Algorithm 1 `Correct`): Δr = K_p·e(t) + K_i·∫e dt +
 * K_d·de/dt, and r' = r + Δr. Time comes in as the step `dtS` the caller measured on its Clock; nothing here reads
 * time.
 *
 * Sign: the paper writes e = T_target − T_i and adds Δr; with positive gains that would remove replicas from a
 * stage that is too slow. Here e is the relative excess delay (T_i − T_target) / T_target, clamped to
 * [−1, `errorCap`] (T_i is infinite on an overloaded stage), so positive gains add replicas to a slow stage. The
 * integral is clamped to ±`integralCap` (anti-windup) and reset when the stage stops being key.
 */

/** PID gains (typed strategy parameters `kp`, `ki`, `kd`; ranges in strategy.ts). ki per s, kd in s. */
export interface PidGains {
  kp: number;
  ki: number;
  kd: number;
}

/** Error and integral clamps. */
export interface PidOptions {
  /** Largest relative error fed to the controller (an overloaded stage has T_i = ∞). Default 4. */
  errorCap?: number;
  /** Bound on |∫e dt| (s). Default 10. */
  integralCap?: number;
}

/** One stage's PID state. */
export class Pid {
  private integral = 0;
  private lastError: number | undefined;
  private readonly errorCap: number;
  private readonly integralCap: number;

  constructor(
    readonly gains: PidGains,
    opts: PidOptions = {},
  ) {
    this.errorCap = opts.errorCap ?? 4;
    this.integralCap = opts.integralCap ?? 10;
  }

  /** The relative error e = (T − T_target) / T_target, clamped to [−1, errorCap]. */
  error(delayMs: number, targetMs: number): number {
    if (!(targetMs > 0)) throw new RangeError(`target delay must be > 0 ms, got ${targetMs}`);
    const e = (delayMs - targetMs) / targetMs;
    return Number.isNaN(e) ? this.errorCap : Math.max(-1, Math.min(this.errorCap, e));
  }

  /** Eq. 3: the correction Δr (replicas, real-valued) for error `e` after `dtS` seconds (> 0). */
  update(e: number, dtS: number): number {
    if (!(dtS > 0)) throw new RangeError(`dtS must be > 0, got ${dtS}`);
    this.integral = Math.max(-this.integralCap, Math.min(this.integralCap, this.integral + e * dtS));
    const derivative = this.lastError === undefined ? 0 : (e - this.lastError) / dtS;
    this.lastError = e;
    return this.gains.kp * e + this.gains.ki * this.integral + this.gains.kd * derivative;
  }

  /** Forgets the integral and the last error (the stage is no longer key). */
  reset(): void {
    this.integral = 0;
    this.lastError = undefined;
  }
}
