import { describe, expect, it } from "vitest";
import { isTidegateError } from "../core/errors.js";
import { ANONYMOUS, authenticate, bearerToken, mayUseModel, requireAdmin } from "./auth.js";

const keys = [
  { key: "sk-aaaa", tenant: "a" },
  { key: "sk-bbbb", tenant: "b", region: "us-west", models: ["llama3.2-3b"] },
];

describe("API keys", () => {
  it("parses bearer tokens and nothing else", () => {
    expect(bearerToken("Bearer sk-1")).toBe("sk-1");
    expect(bearerToken("bearer   sk-1 ")).toBe("sk-1");
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });

  it("no keys configured: open, anonymous, every model", () => {
    expect(authenticate([], undefined)).toBe(ANONYMOUS);
    expect(mayUseModel(ANONYMOUS, "anything")).toBe(true);
  });

  it("resolves a key to its tenant, region and model scope; rejects missing and unknown keys with 401", () => {
    expect(authenticate(keys, "Bearer sk-aaaa")).toEqual({ tenant: "a" });
    const b = authenticate(keys, "Bearer sk-bbbb");
    expect(b).toEqual({ tenant: "b", region: "us-west", models: ["llama3.2-3b"] });
    expect(mayUseModel(b, "llama3.2-3b")).toBe(true);
    expect(mayUseModel(b, "llama2-70b")).toBe(false);
    expect(() => authenticate(keys, undefined)).toThrow(/missing API key/);
    let err: unknown;
    // A key without "Bearer " is not a missing key: the message says the scheme is wrong, and never repeats the key.
    for (const [header, said] of [["sk-aaaa", /must carry the API key as Bearer <key>; it has no scheme: a key sent without "Bearer " in front of it/], ["Basic c2stYWFhYQ==", /it has the Basic scheme/], ["Bearer", /it has the Bearer scheme but no token/]] as const) {
      try {
        authenticate(keys, header);
        err = undefined;
      } catch (e) {
        err = e;
      }
      expect(isTidegateError(err, "unauthorized")).toBe(true);
      expect((err as Error).message).toMatch(said);
      expect((err as Error).message).not.toMatch(/missing|sk-aaaa|c2stYWFhYQ/);
    }
    expect(() => requireAdmin(["adm"], "adm")).toThrow(/must carry the admin key as Bearer <admin key>; it has no scheme/);
    try {
      authenticate(keys, "Bearer sk-aaab");
    } catch (e) {
      err = e;
    }
    expect(isTidegateError(err, "unauthorized")).toBe(true);
    expect(String((err as Error).message)).not.toContain("sk-aaab");
  });

  it("admin endpoints: 401 without a token, 403 with a wrong one, closed when no admin keys exist", () => {
    const code = (f: () => void) => {
      try {
        f();
        return "ok";
      } catch (e) {
        return isTidegateError(e, "unauthorized") ? "401" : isTidegateError(e, "forbidden") ? "403" : "other";
      }
    };
    expect(code(() => requireAdmin(["admin-key-1"], "Bearer admin-key-1"))).toBe("ok");
    expect(code(() => requireAdmin(["admin-key-1"], undefined))).toBe("401");
    expect(code(() => requireAdmin(["admin-key-1"], "Bearer sk-aaaa"))).toBe("403");
    expect(code(() => requireAdmin([], "Bearer anything"))).toBe("403");
  });
});
