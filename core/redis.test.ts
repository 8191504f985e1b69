import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, parseConfig } from "./config.js";
import { isRedisUnavailable, redactUrl, redisEndpoint, redisTlsOptions } from "./redis.js";

const withQueue = (queue: Record<string, unknown>) => () => parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), queue });

describe("core/redis", () => {
  it("names Redis by host and port, never with its credentials", () => {
    expect(redisEndpoint("redis://tidegate:s3cret@10.0.0.5:6380/0")).toBe("10.0.0.5:6380");
    expect(redisEndpoint("rediss://cache.internal:6380")).toBe("cache.internal:6380");
    expect(redactUrl("rediss://tidegate:s3cret@10.0.0.5:6380")).toBe("rediss://10.0.0.5:6380");
    expect(redactUrl("redis://127.0.0.1:6379")).toBe("redis://127.0.0.1:6379");
  });

  it("tells a lost connection from a reply Redis gave", () => {
    expect(isRedisUnavailable(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }))).toBe(true);
    expect(isRedisUnavailable(new Error("Connection is closed."))).toBe(true);
    expect(isRedisUnavailable(Object.assign(new Error("Reached the max retries per request limit (which is 3)."), { name: "MaxRetriesPerRequestError" }))).toBe(true);
    expect(isRedisUnavailable(new Error("LOADING Redis is loading the dataset in memory"))).toBe(true);
    expect(isRedisUnavailable(new Error("WRONGTYPE Operation against a key holding the wrong kind of value"))).toBe(false);
    expect(isRedisUnavailable("ECONNREFUSED")).toBe(false);
  });

  it("turns TLS on for rediss:// or any TLS file, and says which file it cannot read", () => {
    expect(redisTlsOptions("redis://127.0.0.1:6379")).toBeUndefined();
    expect(redisTlsOptions("rediss://127.0.0.1:6380")).toEqual({});
    expect(redisTlsOptions("rediss://127.0.0.1:6380", { serverName: "redis.internal" })).toEqual({ servername: "redis.internal" });
    expect(() => redisTlsOptions("redis://127.0.0.1:6379", { caFile: "/nonexistent/ca.pem" })).toThrow(/queue\.redisTls\.caFile: cannot read "\/nonexistent\/ca.pem"/);
  });

  it("config: a URL that is not redis:// or rediss://, or a certificate without its key, is an error naming the path", () => {
    expect(withQueue({ redisUrl: "http://127.0.0.1:6379" })).toThrow(/queue\.redisUrl: must start with redis:\/\/ or rediss:\/\//);
    expect(withQueue({ redisUrl: "http://user:pw@127.0.0.1:6379" })).not.toThrow(/pw/);
    expect(withQueue({ redisTls: { certFile: "c.pem" } })).toThrow(/queue\.redisTls\.keyFile: certFile and keyFile go together/);
    expect(withQueue({ redisTls: { caFile: "ca.pem", extra: 1 } })).toThrow(/queue\.redisTls\.extra/);
    expect(withQueue({ redisUrl: "rediss://u:p@h:6380", redisTls: { caFile: "ca.pem" } })().queue.redisTls).toEqual({ caFile: "ca.pem" });
  });
});
