/**
 * Who may see and act on plans. Two roles: `admin` (read, approve/reject, plan now) and `planner` (read only).
 * A request proves its role with `Authorization: Bearer <key>` (scripts) or a session cookie a browser got by
 * signing in at /login with a key. Sessions live in this process's memory (a restart signs everyone out) and hold
 * the role, the key's fingerprint (never the key), a CSRF token every form must echo, and an expiry. Keys are
 * compared in constant time on their SHA-256 digests, so neither content nor length leaks through timing.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Clock } from "../core/clock.js";

/** `admin` may act on plans; `planner` may only read them. */
export type Role = "admin" | "planner";

/** The keys of each role (config router.adminKeys / router.plannerKeys, plus the environment; planner/keys.ts). */
export interface PlanKeys {
  admin: readonly string[];
  planner: readonly string[];
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** A key's public name: the first 8 hex digits of its SHA-256 (safe to log and show). */
export function fingerprint(key: string): string {
  return digest(key).toString("hex").slice(0, 8);
}

/** The role a key has (admin wins if a key is in both lists), or undefined. Constant time per configured key. */
export function roleOf(key: string, keys: PlanKeys): { role: Role; fingerprint: string } | undefined {
  const d = digest(key);
  let role: Role | undefined;
  for (const k of keys.admin) if (timingSafeEqual(digest(k), d)) role = "admin";
  if (role === undefined) for (const k of keys.planner) if (timingSafeEqual(digest(k), d)) role = "planner";
  return role === undefined ? undefined : { role, fingerprint: fingerprint(key) };
}

/** Whether a key with this fingerprint still has this role (a session ends when its key is removed). */
function stillHolds(keys: PlanKeys, role: Role, fp: string): boolean {
  return (role === "admin" ? keys.admin : keys.planner).some((k) => fingerprint(k) === fp);
}

/** A signed-in browser. */
export interface Session {
  /** The cookie value (256 random bits, base64url). */
  id: string;
  /** The token every form of this session must carry (256 random bits). */
  csrf: string;
  role: Role;
  keyFingerprint: string;
  /** The name given at sign-in ("" when none). */
  name: string;
  expiresAtMs: number;
}

/** "Ana (admin key 1a2b3c4d)": how a session or bearer caller is recorded as `by` (never the key itself). */
export function whoOf(s: { name: string; role: Role; keyFingerprint: string }): string {
  return `${s.name ? `${s.name} ` : ""}(${s.role} key ${s.keyFingerprint})`;
}

/** Constant-time string equality (for CSRF tokens). */
export function sameToken(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/** A fresh random token, base64url. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** Sessions in memory, on the injected clock; the oldest is dropped beyond `max`. */
export class SessionStore {
  private readonly sessions = new Map<string, Session>();
  constructor(
    private readonly clock: Clock,
    private readonly keys: PlanKeys,
    /** Session lifetime, ms (default 12 h). */
    readonly ttlMs = 12 * 3_600_000,
    private readonly max = 10_000,
  ) {}

  create(role: Role, keyFingerprint: string, name: string): Session {
    const s: Session = { id: randomToken(), csrf: randomToken(), role, keyFingerprint, name, expiresAtMs: this.clock.now() + this.ttlMs };
    this.sessions.set(s.id, s);
    if (this.sessions.size > this.max) this.sessions.delete(this.sessions.keys().next().value!);
    return s;
  }

  /** The live session for a cookie value; expired sessions and sessions whose key was removed are dropped. */
  get(id: string | undefined): Session | undefined {
    if (id === undefined) return undefined;
    const s = this.sessions.get(id);
    if (s === undefined) return undefined;
    if (s.expiresAtMs <= this.clock.now() || !stillHolds(this.keys, s.role, s.keyFingerprint)) {
      this.sessions.delete(id);
      return undefined;
    }
    return s;
  }

  delete(id: string): void {
    this.sessions.delete(id);
  }
}

/** Cookie header → name/value pairs (first occurrence wins). */
export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i <= 0) continue;
    const k = part.slice(0, i).trim();
    if (!(k in out)) out[k] = part.slice(i + 1).trim();
  }
  return out;
}

/** A Set-Cookie value: HttpOnly, SameSite=Strict, Path=/, with Max-Age (0 deletes) and Secure when asked. */
export function cookie(name: string, value: string, maxAgeS: number, secure: boolean): string {
  return `${name}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${Math.max(0, Math.floor(maxAgeS))}${secure ? "; Secure" : ""}`;
}
