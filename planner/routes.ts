/**
 * The plans site as a hono sub-app (mount with `app.route("/", plansRoutes(opts))`):
 *   GET  /login, POST /login, POST /logout          sign in with a key → session cookie (planner/auth.ts)
 *   GET  /plans[?model=&region=]                   the index: timeline of hours (HTML; JSON with Accept or .json)
 *   GET  /plans/{id}[.json]                        one plan (HTML with the actual load overlaid once known; JSON)
 *   POST /plans/{id}/approve, /plans/{id}/reject   advisory plans: admin only
 *   POST /plans/now                                plan off-schedule: admin only
 * A caller is a bearer key (scripts: no CSRF token needed) or a session cookie (every POST must carry the
 * session's CSRF token). Without either, browsers are sent to /login and other clients get 401 with a
 * `WWW-Authenticate: Bearer` challenge; a key that is not configured gets 403. A wrong key (at /login or as a
 * bearer) is answered after `loginFailDelayMs`, one at a time, and counted in tidegate_plans_login_failures_total.
 * Keys never reach logs or pages.
 */
import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { WallClock, type Clock } from "../core/clock.js";
import { TidegateError, findTidegateError } from "../core/errors.js";
import { silentLogger, type Logger } from "../core/log.js";
import { Counter, initLabels, type Registry } from "../core/metrics.js";
import { MINUTE_MS, type DemandHistory } from "../forecasts/history.js";
import { downsampleMean } from "../forecasts/series.js";
import { SessionStore, cookie, parseCookies, randomToken, roleOf, sameToken, whoOf, type PlanKeys, type Role, type Session } from "./auth.js";
import { esc } from "./charts.js";
import { forecastStartMs, pageShell, renderPlanHtml } from "./html.js";
import { renderPlansIndex, type IndexFilter } from "./index-page.js";
import { renderLoginPage } from "./login-page.js";
import type { PlanActions } from "./loop.js";
import type { PlanReport } from "./report.js";
import type { PlanStore } from "./store.js";
import { sameFleet, type PlanFleet } from "./fingerprint.js";

export { esc };

/** Where the reports come from, who may read and act on them, and what can act. */
export interface PlansRoutesOptions {
  store: PlanStore;
  /** Keys per role. */
  keys?: PlanKeys;
  /** Shorthand for `keys: { admin: adminKeys, planner: [] }` (the config's router.adminKeys). */
  adminKeys?: readonly string[];
  /** Approve/reject/plan now; absent where this process only serves reports (`tidegate global`). */
  actions?: PlanActions;
  /** For the actual load of a plan's hour (overlaid once recorded). */
  history?: DemandHistory;
  clock?: Clock;
  /** Delay before answering a wrong key at /login (default 1000 ms). */
  loginFailDelayMs?: number;
  /** Session lifetime (default 12 h). */
  sessionTtlMs?: number;
  /** Mark cookies Secure; default: when the request came over HTTPS (its URL, or X-Forwarded-Proto: https). */
  secureCookies?: boolean;
  log?: Logger;
  /** Registers the site's metrics here at once (or later with `registerMetrics`). */
  registry?: Registry;
  /**
   * The configuration this process plans for (fingerprint.ts): `/plans` lists only its plans (and the plans not
   * known to be another's), `/plans?fleet=all` every plan the store keeps. Absent: every plan.
   */
  fleet?: PlanFleet;
}

/** The sub-app with its metrics and sessions. */
export interface PlansSite {
  app: Hono;
  sessions: SessionStore;
  /** Adds the site's counters to a registry (once). */
  registerMetrics(registry: Registry): void;
  /** Late wiring: the planner loop exists only after the router (and this site) is built. */
  setActions(actions: PlanActions | undefined): void;
}

const SESSION = "tg_session";
const LOGIN = "tg_login";
const HTML_HEADERS = {
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};
const NOTICES: Record<string, string> = {
  approved: "Approved: the targets were sent to the regions (see their answers below).",
  rejected: "Rejected: nothing was sent to the regions.",
  planned: "Planned now, off-schedule.",
};

type Caller = { role: Role; who: string; session?: Session };

/** A path to return to after sign-in: only /plans pages, never another site. */
function safeNext(next: string | undefined): string {
  return next !== undefined && /^\/plans(\/[A-Za-z0-9._-]+)?(\?[A-Za-z0-9=&._%-]*)?$/.test(next) ? next : "/plans";
}

/** The site (see the file comment). */
export function plansSite(opts: PlansRoutesOptions): PlansSite {
  const keys: PlanKeys = opts.keys ?? { admin: opts.adminKeys ?? [], planner: [] };
  const clock = opts.clock ?? new WallClock();
  const log = opts.log ?? silentLogger;
  const sessions = new SessionStore(clock, keys, opts.sessionTtlMs);
  const secureFor = (c: Context) => opts.secureCookies ?? (c.req.url.startsWith("https:") || c.req.header("x-forwarded-proto") === "https");
  // Wrong keys wait in one queue: each is answered `delay` after the previous one, so guessing in parallel is no faster.
  let failQueue: Promise<void> = Promise.resolve();
  const failDelay = () => (failQueue = failQueue.then(() => clock.sleep(opts.loginFailDelayMs ?? 1000)));
  let actions = opts.actions;
  const loginFailures = new Counter({ name: "tidegate_plans_login_failures_total", help: "Keys refused, by reason (wrong_key: at /login; wrong_bearer: in an Authorization header; bad_form: a /login post without its CSRF token)", labelNames: ["reason"], registers: [] });
  const logins = new Counter({ name: "tidegate_plans_logins_total", help: "Sign-ins at /login, by role", labelNames: ["role"], registers: [] });
  const acts = new Counter({ name: "tidegate_plans_actions_total", help: "Plan actions (approve, reject, plan_now) by outcome (ok, forbidden, bad_csrf, failed)", labelNames: ["action", "outcome"], registers: [] });
  initLabels(loginFailures, { reason: ["wrong_key", "wrong_bearer", "bad_form"] });
  initLabels(logins, { role: ["admin", "planner"] });
  initLabels(acts, { action: ["approve", "reject", "plan_now"], outcome: ["ok", "forbidden", "bad_csrf", "failed"] });
  let registered = false;
  const registerMetrics = (r: Registry) => {
    if (registered) return;
    registered = true;
    r.registerMetric(loginFailures);
    r.registerMetric(logins);
    r.registerMetric(acts);
  };
  if (opts.registry !== undefined) registerMetrics(opts.registry);

  const html = (c: Context, body: string, status: 200 | 401 | 403 = 200) => c.html(body, status, HTML_HEADERS);
  const wantsHtml = (c: Context) => (c.req.header("accept") ?? "").includes("text/html");
  const wantsJson = (c: Context) => (c.req.header("accept") ?? "").includes("application/json");

  /** The caller, or why there is none. */
  function caller(c: Context): Caller | "missing" | "wrong" {
    const auth = c.req.header("authorization");
    if (auth !== undefined) {
      const m = /^Bearer\s+(.+)$/i.exec(auth);
      if (m === null) return "missing";
      const r = roleOf(m[1]!.trim(), keys);
      return r === undefined ? "wrong" : { role: r.role, who: whoOf({ name: "", role: r.role, keyFingerprint: r.fingerprint }) };
    }
    const s = sessions.get(parseCookies(c.req.header("cookie"))[SESSION]);
    return s === undefined ? "missing" : { role: s.role, who: whoOf(s), session: s };
  }

  /** 401/403/redirect for a request without a usable caller; a wrong bearer key waits in the same queue as /login's. */
  async function refuse(c: Context, why: "missing" | "wrong"): Promise<Response> {
    if (why === "wrong") {
      loginFailures.inc({ reason: "wrong_bearer" });
      await failDelay();
    }
    if (why === "missing" && wantsHtml(c) && c.req.method === "GET") return c.redirect(`/login?next=${encodeURIComponent(safeNext(c.req.path + (c.req.url.includes("?") ? c.req.url.slice(c.req.url.indexOf("?")) : "")))}`, 303);
    const err = why === "missing" ? new TidegateError("unauthorized", "sign in at /login, or send Authorization: Bearer <admin or planner key>") : new TidegateError("forbidden", "this key is not an admin or planner key");
    const res = err.toResponse();
    if (why === "missing") res.headers.set("www-authenticate", 'Bearer realm="tidegate plans"');
    return res;
  }

  /** The form fields of a POST; a body that does not parse as its content type is a 400, not a 500. */
  async function formBody(c: Context): Promise<Record<string, string | File | (string | File)[]>> {
    try {
      return await c.req.parseBody();
    } catch (err) {
      throw new TidegateError("invalid_request", "malformed form body: send application/x-www-form-urlencoded or multipart/form-data", { cause: err });
    }
  }

  const app = new Hono();
  // Forms here are a key, a name and a token: anything over 16 KiB is refused before it is read.
  const small = bodyLimit({ maxSize: 16 * 1024, onError: () => new TidegateError("payload_too_large", "form bodies here are at most 16 KiB").toResponse() });
  for (const path of ["/login", "/logout", "/plans/now", "/plans/:id/approve", "/plans/:id/reject"]) app.post(path, small);

  app.get("/login", (c) => {
    const token = randomToken();
    c.header("set-cookie", cookie(LOGIN, token, 15 * 60, secureFor(c)));
    return html(c, renderLoginPage({ csrf: token, next: safeNext(c.req.query("next")) }));
  });

  app.post("/login", async (c) => {
    const form = await formBody(c);
    const given = typeof form.csrf === "string" ? form.csrf : "";
    const expected = parseCookies(c.req.header("cookie"))[LOGIN] ?? "";
    const next = safeNext(typeof form.next === "string" ? form.next : undefined);
    const secure = secureFor(c);
    const again = (error: string, status: 401 | 403) => {
      const token = randomToken();
      c.header("set-cookie", cookie(LOGIN, token, 15 * 60, secure));
      return html(c, renderLoginPage({ csrf: token, next, error }), status);
    };
    if (given === "" || expected === "" || !sameToken(given, expected)) {
      loginFailures.inc({ reason: "bad_form" });
      return again("This form has expired; sign in again.", 403);
    }
    const r = roleOf(typeof form.key === "string" ? form.key.trim() : "", keys);
    if (r === undefined) {
      loginFailures.inc({ reason: "wrong_key" });
      await failDelay();
      log.warn("plans sign-in refused", { reason: "wrong_key" });
      return again("That is not an admin or planner key.", 401);
    }
    let name = (typeof form.name === "string" ? form.name : "").replace(/[^\p{L}\p{N} ._@-]/gu, "").trim().slice(0, 64);
    if (roleOf(name, keys) !== undefined) name = ""; // a key typed into the name field is never recorded
    const s = sessions.create(r.role, r.fingerprint, name);
    logins.inc({ role: r.role });
    log.info("plans sign-in", { who: whoOf(s) });
    c.header("set-cookie", cookie(SESSION, s.id, sessions.ttlMs / 1000, secure));
    c.header("set-cookie", cookie(LOGIN, "", 0, secure), { append: true });
    return c.redirect(next, 303);
  });

  app.post("/logout", async (c) => {
    const who = caller(c);
    const form = await formBody(c);
    if (typeof who === "object" && who.session !== undefined && typeof form.csrf === "string" && sameToken(form.csrf, who.session.csrf)) sessions.delete(who.session.id);
    c.header("set-cookie", cookie(SESSION, "", 0, secureFor(c)));
    return c.redirect("/login", 303);
  });

  app.get("/plans", async (c) => {
    const who = caller(c);
    if (typeof who === "string") return refuse(c, who);
    const every = await opts.store.list();
    const everyFleet = c.req.query("fleet") === "all";
    const list = opts.fleet === undefined || everyFleet ? every : every.filter((r) => sameFleet(r, opts.fleet!.fingerprint));
    if (wantsJson(c)) {
      return c.json({ object: "list", data: list.map((r) => ({ id: r.id, decisionId: r.decisionId, madeAtMs: r.madeAtMs, advisory: r.advisory, review: r.review ?? null, status: r.solver.status, gap: r.solver.gap, cost: r.cost.breakdown?.afterSpot ?? r.cost.total, currency: r.cost.currency ?? "USD", unmet: r.unmet.length })) });
    }
    const f: IndexFilter = {};
    const model = c.req.query("model");
    const region = c.req.query("region");
    if (model) f.model = model;
    if (region) f.region = region;
    if (everyFleet) f.fleet = "all";
    const notice = NOTICES[c.req.query("done") ?? ""];
    const others = every.filter((r) => !list.includes(r));
    const fleets = { ...(opts.fleet === undefined ? {} : { current: opts.fleet }), hidden: others.length, ...(everyFleet ? { all: true } : {}) };
    return html(c, renderPlansIndex(list, f, { fleets, viewer: { role: who.role, who: who.who, ...(who.session ? { csrf: who.session.csrf } : {}) }, canPlanNow: actions !== undefined, ...(notice ? { notice } : {}) }));
  });

  app.get("/plans/:id", async (c) => {
    const who = caller(c);
    if (typeof who === "string") return refuse(c, who);
    let id = c.req.param("id");
    const json = id.endsWith(".json") || wantsJson(c);
    if (id.endsWith(".json")) id = id.slice(0, -5);
    const r = await opts.store.get(id);
    if (r === undefined) return new TidegateError("not_found", `no plan ${JSON.stringify(id)}`, { param: "id" }).toResponse();
    if (json) return c.json(r);
    // Earlier and later plans of the same configuration (all of them for a plan of another one).
    const every = await opts.store.list();
    const list = opts.fleet === undefined || !sameFleet(r, opts.fleet.fingerprint) ? every : every.filter((x) => sameFleet(x, opts.fleet!.fingerprint));
    const at = list.findIndex((x) => x.id === id);
    const notice = NOTICES[c.req.query("done") ?? ""];
    return html(c, renderPlanHtml(r, {
      ...(opts.history === undefined ? {} : { actuals: await actualsOf(r, opts.history, clock.now()) }),
      ...(at >= 0 && at + 1 < list.length ? { prevId: list[at + 1]!.id } : {}),
      ...(at > 0 ? { nextId: list[at - 1]!.id } : {}),
      viewer: { role: who.role, who: who.who, ...(who.session ? { csrf: who.session.csrf } : {}) },
      canReview: actions !== undefined && at === 0,
      ...(notice ? { notice } : {}),
    }));
  });

  /** An admin action: caller, role, CSRF (sessions), then `run`; JSON for bearer callers, a redirect for browsers. */
  const act = (name: "approve" | "reject" | "plan_now", run: (a: PlanActions, who: string, c: Context) => Promise<PlanReport>, done: string) => async (c: Context) => {
    const who = caller(c);
    if (typeof who === "string") return refuse(c, who);
    // Browsers get the error as a page with a way back; scripts get OpenAI-style JSON.
    const fail = (err: TidegateError) => (who.session === undefined ? err.toResponse() : c.html(pageShell("tidegate — not done", `<h1>Not done</h1><p class="warn">${esc(err.message)}</p><p><a href="/plans">back to the plans</a></p>`, { role: who.role, who: who.who, csrf: who.session.csrf }), err.status as 403 | 404 | 409, HTML_HEADERS));
    if (who.session !== undefined) {
      const form = await formBody(c);
      const token = typeof form.csrf === "string" ? form.csrf : (c.req.header("x-csrf-token") ?? "");
      if (token === "" || !sameToken(token, who.session.csrf)) {
        acts.inc({ action: name, outcome: "bad_csrf" });
        return fail(new TidegateError("forbidden", "missing or wrong CSRF token: reload the page and try again"));
      }
    }
    if (who.role !== "admin") {
      acts.inc({ action: name, outcome: "forbidden" });
      return fail(new TidegateError("forbidden", `${name.replace("_", " ")} needs an admin key; this is a read-only planner key`));
    }
    if (actions === undefined) {
      acts.inc({ action: name, outcome: "failed" });
      return fail(new TidegateError("conflict", "this process serves plans but does not run the planner; act where `tidegate planner` (or dev) runs"));
    }
    try {
      const r = await run(actions, who.who, c);
      acts.inc({ action: name, outcome: "ok" });
      log.info("plan action", { action: name, id: r.id, who: who.who });
      return who.session === undefined ? c.json(r) : c.redirect(`/plans/${encodeURIComponent(r.id)}?done=${done}`, 303);
    } catch (err) {
      acts.inc({ action: name, outcome: "failed" });
      const known = findTidegateError(err);
      if (known === undefined) throw err;
      return fail(known);
    }
  };
  app.post("/plans/now", act("plan_now", (a, who) => a.planNow(who), "planned"));
  app.post("/plans/:id/approve", act("approve", (a, who, c) => a.approve(c.req.param("id")!, who), "approved"));
  app.post("/plans/:id/reject", act("reject", (a, who, c) => a.reject(c.req.param("id")!, who), "rejected"));

  return { app, sessions, registerMetrics, setActions: (a) => void (actions = a) };
}

/** The sub-app alone (see `plansSite` for metrics and late wiring). */
export function plansRoutes(opts: PlansRoutesOptions): Hono {
  return plansSite(opts).app;
}

/** Actual IW tokens/s windows of each forecast's planned hour, so far (NaN where not recorded). */
async function actualsOf(r: PlanReport, history: DemandHistory, nowMs: number): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  for (const f of [...r.forecasts].sort((a, b) => b.demandTokensPerS - a.demandTokensPerS).slice(0, 24)) {
    const from = forecastStartMs(r, f);
    if (from >= nowMs) continue;
    const minutes = await history.series({ kind: "iw", model: f.model, region: f.region }, from, from + f.forecastSteps.length * f.stepMs);
    out.set(`${f.model}\t${f.region}`, downsampleMean(minutes, f.stepMs / MINUTE_MS));
  }
  return out;
}
