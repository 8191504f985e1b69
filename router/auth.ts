/**
 * Bearer API keys (config router.apiKeys) and admin keys (router.adminKeys). Keys are compared in constant time;
 * a key never reaches a log or an error message.
 */
import { timingSafeEqual } from "node:crypto";
import { TidegateError } from "../core/errors.js";
import type { ModelName, RegionName } from "../core/models.js";
import type { RouterConfig } from "../core/config.js";

/** Who is calling: the key's tenant, its home region, where it may be served, and its model scope (undefined = all). */
export interface Caller {
  tenant: string;
  /** Home region: first in preference order unless the request names another. */
  region?: RegionName;
  /** Where this caller's requests may be served (data residency); undefined = anywhere. */
  regions?: readonly RegionName[];
  models?: readonly ModelName[];
  /** The key's own in-flight limit (overrides router.tenantMaxInflight). */
  maxInflight?: number;
}

/** The open caller used when no API keys are configured. */
export const ANONYMOUS: Caller = { tenant: "anonymous" };

/** Extracts the token of an `Authorization: Bearer <token>` header; undefined when absent or not a bearer. */
export function bearerToken(header: string | undefined | null): string | undefined {
  if (header == null) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

/** Scheme names an Authorization header may start with that can be said back (anything else might be the key). */
const SCHEMES = ["basic", "digest", "token", "negotiate", "apikey", "api-key", "key", "bearer"];

/**
 * 401 for a header with no bearer token, saying which is wrong — none sent, or sent without the `Bearer ` scheme
 * (`authorization: sk-…`, `Basic …`) — and never repeating what was sent beyond a known scheme's name.
 * `what`: "API key" or "admin key".
 */
export function noBearer(header: string | undefined | null, what: string): TidegateError {
  const h = header?.trim() ?? "";
  if (h === "") return new TidegateError("unauthorized", `missing ${what}: send Authorization: Bearer <${what === "API key" ? "key" : what}>`);
  const first = h.split(/\s+/)[0]!;
  const scheme = SCHEMES.includes(first.toLowerCase()) ? first : undefined;
  const got = scheme === undefined ? "no scheme: a key sent without \"Bearer \" in front of it" : scheme.toLowerCase() === "bearer" ? "the Bearer scheme but no token" : `the ${scheme} scheme`;
  return new TidegateError("unauthorized", `the Authorization header must carry the ${what} as Bearer <${what === "API key" ? "key" : what}>; it has ${got}`);
}

function sameSecret(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/**
 * Resolves the caller from the Authorization header. With no keys configured the API is open (ANONYMOUS).
 * Throws TidegateError unauthorized (401) for a missing or unknown key, or one sent without the Bearer scheme (noBearer).
 */
export function authenticate(keys: RouterConfig["apiKeys"], authorization: string | undefined | null): Caller {
  if (keys.length === 0) return ANONYMOUS;
  const token = bearerToken(authorization);
  if (token === undefined) throw noBearer(authorization, "API key");
  let found: RouterConfig["apiKeys"][number] | undefined;
  for (const k of keys) if (sameSecret(k.key, token)) found = k;
  if (found === undefined) throw new TidegateError("unauthorized", "invalid API key");
  return { tenant: found.tenant, ...(found.region === undefined ? {} : { region: found.region }), ...(found.regions === undefined ? {} : { regions: found.regions }), ...(found.models === undefined ? {} : { models: found.models }), ...(found.maxInflight === undefined ? {} : { maxInflight: found.maxInflight }) };
}

/** True when the caller's key may use `model`. */
export function mayUseModel(caller: Caller, model: ModelName): boolean {
  return caller.models === undefined || caller.models.includes(model);
}

/**
 * Why a key scoped to other models is refused `model` (403 forbidden, param `model`): the one reason a streamed
 * request (router/completions.ts) and a batch line (router/batch/validate.ts) both give.
 */
export function modelForbidden(model: string): TidegateError {
  return new TidegateError("forbidden", `this API key may not use model ${JSON.stringify(model)}`, { param: "model" });
}

/**
 * Admin endpoints (plans, regions, scaling): the bearer token must be one of router.adminKeys. With no admin keys
 * configured, admin endpoints are closed (403), never open. Throws 401 for a missing token, 403 for a wrong one.
 */
export function requireAdmin(adminKeys: readonly string[], authorization: string | undefined | null): void {
  const token = bearerToken(authorization);
  if (token === undefined) throw noBearer(authorization, "admin key");
  if (!adminKeys.some((k) => sameSecret(k, token))) throw new TidegateError("forbidden", "not an admin key");
}
