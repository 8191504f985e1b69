/**
 * Security of the plans site (planner/routes.ts, auth.ts) through hono's in-process requests: roles (a planner key
 * reads but cannot approve or plan now), sign-in (cookie attributes, wrong key delayed and counted), CSRF on every
 * form post, sessions bound to their key, and no key in any log line, page or header.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY, ADMIN_KEY_2, PLANNER_KEY, sampleSite, type SampleSite } from "../test/helpers/plans.js";
import { SessionStore } from "./auth.js";
import type { Clock } from "../core/clock.js";
import { createHash } from "node:crypto";

let s: SampleSite;
/** Every body and header the site sent, for the no-key check. */
const seen: string[] = [];

async function req(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await s.site.app.request(path, init);
  const body = await res.clone().text();
  seen.push(body, JSON.stringify([...res.headers]));
  return res;
}

/** GET /login → the form's token and the login cookie; POST the key; returns the session cookie and its CSRF. */
async function signIn(key: string, name = "tester"): Promise<{ cookie: string; csrf: string; res: Response }> {
  const page = await req("/login?next=/plans");
  const token = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const loginCookie = page.headers.get("set-cookie")!.split(";")[0]!;
  const res = await req("/login", { method: "POST", headers: { cookie: loginCookie, "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ csrf: token, key, name, next: "/plans" }).toString() });
  const set = res.headers.getSetCookie().find((c) => c.startsWith("tg_session="));
  if (set === undefined) return { cookie: "", csrf: "", res };
  const cookie = set.split(";")[0]!;
  const index = await req("/plans", { headers: { cookie, accept: "text/html" } });
  const csrf = /name="csrf" value="([^"]+)"/.exec(await index.text())![1]!;
  return { cookie, csrf, res };
}

const form = (cookie: string, fields: Record<string, string>): RequestInit => ({ method: "POST", headers: { cookie, "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() });

beforeAll(async () => {
  s = await sampleSite({ loginFailDelayMs: 300 });
});
afterAll(async () => {
  await s?.close();
});

describe("plans site security", () => {
  it("sends browsers to /login, challenges scripts without a key, and delays and counts a wrong bearer key", async () => {
    const html = await req("/plans/x", { headers: { accept: "text/html" } });
    expect(html.status).toBe(303);
    expect(html.headers.get("location")).toBe("/login?next=%2Fplans%2Fx");
    const api = await req("/plans");
    expect(api.status).toBe(401);
    expect(api.headers.get("www-authenticate")).toBe('Bearer realm="tidegate plans"');
    const t0 = performance.now();
    expect((await req("/plans", { headers: { authorization: "Bearer not-a-key-at-all" } })).status).toBe(403);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(await s.registry.getSingleMetricAsString("tidegate_plans_login_failures_total")).toMatch(/reason="wrong_bearer"} 1/);
    const basic = await req("/plans", { headers: { authorization: `Basic ${Buffer.from(`x:${ADMIN_KEY}`).toString("base64")}` } });
    expect(basic.status).toBe(401);
    expect(basic.headers.get("www-authenticate")).toBe('Bearer realm="tidegate plans"');
  });

  it("signs in with a key: HttpOnly, SameSite=Strict session cookie with an expiry; next stays on /plans", async () => {
    const { cookie, res } = await signIn(ADMIN_KEY);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/plans");
    const set = res.headers.getSetCookie().find((c) => c.startsWith("tg_session="))!;
    expect(set).toMatch(/; HttpOnly/);
    expect(set).toMatch(/; SameSite=Strict/);
    expect(set).toMatch(/; Max-Age=43200/);
    expect(cookie.length).toBeGreaterThan(30);
    const page = await req("/login");
    const token = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
    const evil = await req("/login", form(page.headers.get("set-cookie")!.split(";")[0]!, { csrf: token, key: ADMIN_KEY, next: "https://evil.example/plans" }));
    expect(evil.headers.get("location")).toBe("/plans");
  });

  it("refuses a wrong key at /login after the delay, and counts it", async () => {
    const before = await s.registry.getSingleMetricAsString("tidegate_plans_login_failures_total");
    expect(before).toMatch(/reason="wrong_key"} 0/);
    const t0 = performance.now();
    const { cookie, res } = await signIn("wrong-key-guess-123");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(res.status).toBe(401);
    expect(cookie).toBe("");
    expect(await res.text()).toContain("not an admin or planner key");
    expect(await s.registry.getSingleMetricAsString("tidegate_plans_login_failures_total")).toMatch(/reason="wrong_key"} 1/);
  });

  it("answers parallel wrong keys one delay apart, so guessing in parallel is no faster", async () => {
    const t0 = performance.now();
    const done = await Promise.all([1, 2, 3].map(async (i) => {
      await signIn(`wrong-key-guess-${i}00`);
      return performance.now() - t0;
    }));
    expect(Math.max(...done)).toBeGreaterThanOrEqual(3 * 290);
    expect(await s.registry.getSingleMetricAsString("tidegate_plans_login_failures_total")).toMatch(/reason="wrong_key"} 4/);
  });

  it("never records a key typed into the name field", async () => {
    const { cookie } = await signIn(ADMIN_KEY, ADMIN_KEY_2);
    const page = await (await req("/plans", { headers: { cookie } })).text();
    expect(page).toMatch(/signed in as \(admin key [0-9a-f]{8}\)/);
  });

  it("refuses form bodies over 16 KiB", async () => {
    expect((await req("/login", form("", { key: "x".repeat(20_000) }))).status).toBe(413);
  });

  it("refuses a login form posted without its CSRF token", async () => {
    const res = await req("/login", form("", { key: ADMIN_KEY }));
    expect(res.status).toBe(403);
    expect(res.headers.getSetCookie().some((c) => c.startsWith("tg_session="))).toBe(false);
    expect(await s.registry.getSingleMetricAsString("tidegate_plans_login_failures_total")).toMatch(/reason="bad_form"} 1/);
  });

  it("lets a planner key read but not approve or plan now (bearer and session)", async () => {
    const id = s.reports.at(-1)!.id;
    const bearer = { authorization: `Bearer ${PLANNER_KEY}` };
    expect((await req("/plans", { headers: bearer })).status).toBe(200);
    expect((await req(`/plans/${id}.json`, { headers: bearer })).status).toBe(200);
    expect((await req(`/plans/${id}/approve`, { method: "POST", headers: bearer })).status).toBe(403);
    expect((await req("/plans/now", { method: "POST", headers: bearer })).status).toBe(403);
    const p = await signIn(PLANNER_KEY);
    const page = await (await req(`/plans/${id}`, { headers: { cookie: p.cookie } })).text();
    expect(page).not.toContain("/approve");
    expect(page).toContain("read-only planner key");
    expect((await req(`/plans/${id}/approve`, form(p.cookie, { csrf: p.csrf }))).status).toBe(403);
    expect((await req("/plans/now", form(p.cookie, { csrf: p.csrf }))).status).toBe(403);
    expect((await s.store.get(id))!.review).toBeUndefined();
    expect(s.links.every((l) => l.sent.length === 0)).toBe(true);
  });

  it("refuses an admin form post without the CSRF token, or with another session's", async () => {
    const id = s.reports.at(-1)!.id;
    const a = await signIn(ADMIN_KEY, "Ana");
    const b = await signIn(ADMIN_KEY_2, "Bo");
    expect((await req(`/plans/${id}/approve`, form(a.cookie, {}))).status).toBe(403);
    expect((await req(`/plans/${id}/approve`, form(a.cookie, { csrf: b.csrf }))).status).toBe(403);
    expect((await req(`/plans/${id}/reject`, form(b.cookie, { csrf: a.csrf }))).status).toBe(403);
    expect((await req("/plans/now", form(a.cookie, { csrf: "" }))).status).toBe(403);
    expect((await s.store.get(id))!.review).toBeUndefined();
    expect(await s.registry.getSingleMetricAsString("tidegate_plans_actions_total")).toMatch(/action="approve",outcome="bad_csrf"} 2/);
  });

  it("approves an advisory plan from a session: recorded with who and when, sent to the regions only then", async () => {
    const id = s.reports.at(-1)!.id;
    expect(s.links.every((l) => l.sent.length === 0)).toBe(true);
    const older = s.reports[0]!.id;
    const a = await signIn(ADMIN_KEY, "Ana");
    const stale = await req(`/plans/${older}/approve`, form(a.cookie, { csrf: a.csrf }));
    expect(stale.status).toBe(409);
    expect(await stale.text()).toMatch(/was not advisory: its targets were sent when it was made.*back to the plans/s);
    const res = await req(`/plans/${id}/approve`, form(a.cookie, { csrf: a.csrf }));
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(`/plans/${id}?done=approved`);
    const r = (await s.store.get(id))!;
    expect(r.review!.state).toBe("approved");
    expect(r.review!.by).toMatch(/^Ana \(admin key [0-9a-f]{8}\)$/);
    expect(Math.abs(r.review!.atMs - Date.now())).toBeLessThan(60_000);
    for (const l of s.links) {
      expect(l.sent).toHaveLength(1);
      expect(l.sent[0]!.advisory).toBe(false);
      expect(l.sent[0]!.decisionId).toBe(r.decisionId);
    }
    expect(r.acks.map((x) => x.accepted)).toEqual([true, true]);
    expect((await req(`/plans/${id}/reject`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status).toBe(409);
  });

  it("plans now for an admin bearer key (JSON back, no CSRF needed)", async () => {
    const before = (await s.store.list()).length;
    const res = await req("/plans/now", { method: "POST", headers: { authorization: `Bearer ${ADMIN_KEY_2}` } });
    expect(res.status).toBe(200);
    const r = (await res.json()) as { id: string; trigger: { kind: string; by: string } };
    expect(r.trigger.kind).toBe("manual");
    expect(r.trigger.by).toMatch(/^\(admin key [0-9a-f]{8}\)$/);
    expect((await s.store.list()).length).toBe(before + 1);
  });

  it("ends a session when it expires or its key is removed", () => {
    let now = 0;
    const clock = { now: () => now } as unknown as Clock;
    const keys = { admin: ["k-admin-123"], planner: [] as string[] };
    const store = new SessionStore(clock, keys, 1000);
    const sess = store.create("admin", "deadbeef", "");
    expect(store.get(sess.id)).toBeUndefined(); // fingerprint deadbeef is no configured key
    const real = store.create("admin", createHash("sha256").update("k-admin-123").digest("hex").slice(0, 8), "");
    expect(store.get(real.id)).toBeDefined();
    now = 1000;
    expect(store.get(real.id)).toBeUndefined();
  });

  it("never shows or logs a key", async () => {
    expect(s.logLines.length).toBeGreaterThan(3);
    expect(s.logLines.some((l) => l.includes("plans sign-in refused"))).toBe(true);
    const everything = [...seen, ...s.logLines].join("\n");
    for (const k of [ADMIN_KEY, ADMIN_KEY_2, PLANNER_KEY]) expect(everything).not.toContain(k);
  });
});
