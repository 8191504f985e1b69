/**
 * `/plans` and `/plans/{id}` as a hono sub-app for the global router to mount: HTML by default, JSON with
 * `Accept: application/json` or a `.json` suffix. Every route needs `Authorization: Bearer <admin key>`; without
 * one it answers 401, with a non-admin key 403, in OpenAI's error format.
 */
import { Hono } from "hono";
import { timingSafeEqual } from "node:crypto";
import { TidegateError } from "../core/errors.js";
import { esc, renderPlanHtml } from "./html.js";
import type { PlanStore } from "./store.js";

/** Where the reports come from and which keys may read them. */
export interface PlansRoutesOptions {
  store: PlanStore;
  /** Bearer keys allowed to read plans (the config's router.adminKeys); empty means every request is refused. */
  adminKeys: readonly string[];
}

function isAdmin(header: string | undefined, keys: readonly string[]): "ok" | "missing" | "wrong" {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? "");
  if (m === null) return "missing";
  const given = Buffer.from(m[1]!.trim());
  return keys.some((k) => {
    const kb = Buffer.from(k);
    return kb.length === given.length && timingSafeEqual(kb, given);
  })
    ? "ok"
    : "wrong";
}

/** The sub-app; mount with `app.route("/", plansRoutes(opts))`. */
export function plansRoutes(opts: PlansRoutesOptions): Hono {
  const app = new Hono();
  app.use("/plans/*", async (c, next) => {
    const a = isAdmin(c.req.header("authorization"), opts.adminKeys);
    if (a === "missing") return new TidegateError("unauthorized", "an admin bearer key is required").toResponse();
    if (a === "wrong") return new TidegateError("forbidden", "this key is not an admin key").toResponse();
    return next();
  });
  app.use("/plans", async (c, next) => {
    const a = isAdmin(c.req.header("authorization"), opts.adminKeys);
    if (a === "missing") return new TidegateError("unauthorized", "an admin bearer key is required").toResponse();
    if (a === "wrong") return new TidegateError("forbidden", "this key is not an admin key").toResponse();
    return next();
  });
  const wantsJson = (accept: string | undefined) => (accept ?? "").includes("application/json");
  app.get("/plans", async (c) => {
    const list = await opts.store.list();
    if (wantsJson(c.req.header("accept"))) {
      return c.json({ object: "list", data: list.map((r) => ({ id: r.id, decisionId: r.decisionId, madeAtMs: r.madeAtMs, advisory: r.advisory, status: r.solver.status, gap: r.solver.gap, cost: r.cost.total, unmet: r.unmet.length })) });
    }
    const rows = list.map((r) => `<tr><td><a href="/plans/${encodeURIComponent(r.id)}">${esc(r.id)}</a></td><td>${r.decisionId}</td><td>${esc(new Date(r.madeAtMs).toISOString())}</td><td>${r.advisory ? "advisory" : "acted"}</td><td>${esc(r.solver.status)}</td><td>${(100 * r.solver.gap).toFixed(3)}%</td><td>${r.cost.total.toFixed(2)}</td><td>${r.unmet.length}</td></tr>`).join("\n");
    return c.html(`<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>tidegate plans</title></head><body><h1>Plans</h1><table><tr><th>id</th><th>decision</th><th>made</th><th>mode</th><th>status</th><th>gap</th><th>cost</th><th>unmet</th></tr>${rows}</table></body></html>`);
  });
  app.get("/plans/:id", async (c) => {
    let id = c.req.param("id");
    const json = id.endsWith(".json") || wantsJson(c.req.header("accept"));
    if (id.endsWith(".json")) id = id.slice(0, -5);
    const r = await opts.store.get(id);
    if (r === undefined) return new TidegateError("not_found", `no plan ${JSON.stringify(id)}`, { param: "id" }).toResponse();
    return json ? c.json(r) : c.html(renderPlanHtml(r));
  });
  return app;
}
