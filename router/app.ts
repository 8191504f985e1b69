/**
 * The global router's hono app: the public OpenAI-compatible API, health and metrics, plus the sub-apps other tiers
 * mount (the Batch API, the planner's /plans). Completions are handled on the raw node:http request/response
 * (router/completions.ts) so SSE bytes go straight to the socket; everything else is ordinary hono.
 */
import { Hono, type Context, type Env, type Schema } from "hono";
import type { HttpBindings } from "@hono/node-server";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { TidegateError, errorResponse, toTidegateError } from "../core/errors.js";
import type { ApiKind } from "../core/openai.js";
import { authenticate, mayUseModel, requireAdmin } from "./auth.js";
import { handleCompletion, type CompletionDeps } from "./completions.js";

/** A sub-app mounted under `path` (e.g. `{ path: "/v1", app: batchApp }` or `{ path: "/plans", app: plansApp }`). */
export interface RouterMount {
  path: string;
  app: Hono<Env, Schema, string>;
}

export interface RouterAppOptions {
  /** Sub-apps mounted after the built-in routes, in order. */
  mounts?: readonly RouterMount[];
}

/** The hono env of the router app: served by @hono/node-server, so the node request/response are bindings. */
export type RouterEnv = { Bindings: HttpBindings };

/**
 * Builds the router app. Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /healthz and
 * /readyz (503 with no fresh region telemetry), GET /livez, GET /metrics, then `mounts`. Unknown paths and thrown errors render as OpenAI-style error bodies.
 */
export function createRouterApp(deps: CompletionDeps, options: RouterAppOptions = {}): Hono<RouterEnv> {
  const app = new Hono<RouterEnv>();
  const started = Math.floor(deps.clock.now() / 1000);

  const completion = (kind: ApiKind) => async (c: { env: HttpBindings | undefined }) => {
    const env = c.env;
    if (env?.incoming === undefined || env.outgoing === undefined) {
      throw new TidegateError("internal", "completions must be served through @hono/node-server (node:http bindings missing)");
    }
    await handleCompletion(deps, kind, env.incoming, env.outgoing);
    return RESPONSE_ALREADY_SENT;
  };
  app.post("/v1/chat/completions", (c) => completion("chat")(c));
  app.post("/v1/completions", (c) => completion("completion")(c));

  app.get("/v1/models", (c) => {
    const caller = authenticate(deps.config.router.apiKeys, c.req.header("authorization"));
    const data = deps.config.models
      .filter((m) => mayUseModel(caller, m.name))
      .map((m) => ({ id: m.name, object: "model", created: started, owned_by: "tidegate" }));
    return c.json({ object: "list", data });
  });

  // Readiness (/readyz, and /healthz for compatibility): 200 only while at least one region's telemetry is fresher
  // than router.telemetryStaleMs, else 503: a router that can reach no region cannot serve. Liveness (/livez) is
  // the process answering at all.
  const readiness = (c: Context) => {
    const regions: Record<string, { available: boolean; telemetryAgeMs: number | null }> = {};
    let fresh = 0;
    for (const r of deps.config.regions) {
      const models = deps.config.models.filter((m) => deps.selector.hostingRegions(m.name).includes(r.name));
      const age = deps.selector.telemetryAgeMs(r.name);
      if (age !== undefined && age <= deps.config.router.telemetryStaleMs) fresh++;
      regions[r.name] = { available: models.some((m) => deps.selector.candidate(r.name, m.name).available), telemetryAgeMs: age ?? null };
    }
    const ready = fresh > 0;
    return c.json({ status: ready ? "ok" : "no region with fresh telemetry", regions }, ready ? 200 : 503);
  };
  app.get("/healthz", readiness);
  app.get("/readyz", readiness);
  app.get("/livez", (c) => c.json({ status: "ok" }));

  app.get("/metrics", async (c) => {
    const text = await deps.metrics.registry.metrics();
    return c.body(text, 200, { "content-type": deps.metrics.registry.contentType });
  });

  // Admin: what a region runs — every instance with its state, node, model and since when; its nodes; recent
  // scaling failures and actions (the region's listing over its link). Needs an admin key.
  app.get("/admin/regions/:region/instances", async (c) => {
    requireAdmin(deps.config.router.adminKeys, c.req.header("authorization"));
    const region = c.req.param("region");
    const link = deps.links.get(region);
    if (link === undefined) throw new TidegateError("not_found", `unknown region ${JSON.stringify(region)}; known: ${[...deps.links.keys()].join(", ")}`);
    return c.json(await link.instances());
  });

  for (const m of options.mounts ?? []) app.route(m.path, m.app);

  // A path served with other methods is 405 with Allow (GET /v1/chat/completions: use POST), any other 404.
  app.notFound((c) => {
    const allow = allowedMethods(app.routes, c.req.path);
    if (allow.length === 0) return new TidegateError("not_found", `no route for ${c.req.method} ${c.req.path}`).toResponse();
    const res = new TidegateError("method_not_allowed", `Invalid method for URL (${c.req.method} ${c.req.path}): use ${allow.filter((m) => m !== "HEAD").join(" or ")}`).toResponse();
    res.headers.set("allow", allow.join(", "));
    return res;
  });
  app.onError((err, c) => {
    const te = toTidegateError(err);
    if (te.code === "internal") deps.logger.error("router: internal error", { err, path: c.req.path });
    return errorResponse(te, deps.config.router.retryAfterS);
  });
  return app;
}

/**
 * The methods `routes` serve `path` with (a route's `:param` segment matches any one segment; middleware and wildcard
 * routes are not routes of a path), HEAD with GET, sorted; empty when no route has the path.
 */
export function allowedMethods(routes: readonly { method: string; path: string }[], path: string): string[] {
  const methods = new Set<string>();
  for (const r of routes) {
    if (r.method === "ALL" || r.path.includes("*")) continue;
    const pattern = new RegExp(`^${r.path.split("/").map((seg) => (seg.startsWith(":") ? "[^/]+" : seg.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))).join("/")}/?$`);
    if (pattern.test(path)) methods.add(r.method);
  }
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods].sort();
}
