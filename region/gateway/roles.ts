/**
 * Instance roles in prefill/decode disaggregation (pd.ts): which instances take which requests. Apart from pd.ts so
 * that the chooser, which filters by them, and pd.ts, which books through the chooser, do not import each other.
 */
import type { InstanceRecord } from "./instance-table.js";

export type Role = "prefill" | "decode" | "both";
/** Instances that take plain requests. */
export const PLAIN_ROLES: ReadonlySet<Role> = new Set<Role>(["both"]);
export const PREFILL_ROLES: ReadonlySet<Role> = new Set<Role>(["prefill"]);
export const DECODE_ROLES: ReadonlySet<Role> = new Set<Role>(["decode"]);
/** Instances that take a disaggregated model's request whole (its uncached prompt under routing.pdMinPrefillTokens). */
export const WHOLE_ROLES: ReadonlySet<Role> = new Set<Role>(["decode", "both"]);

/** An instance's role (Engine.role; absent = "both"). */
export function roleOf(rec: InstanceRecord): Role {
  return rec.engine.role ?? "both";
}
