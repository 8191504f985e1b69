/**
 * A Redis for one vitest file: started (or taken from REDIS_URL) before its tests, with one shared client, and every
 * key prefix handed out by `prefix()` deleted afterwards. Call `useTestRedis()` at the top level of a test file.
 */
import { afterAll, beforeAll } from "vitest";
import { Redis } from "ioredis";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "./redis.js";

export interface RedisFixture {
  /** The server's URL (valid once the file's tests run). */
  readonly url: string;
  /** A client shared by the file's tests. */
  readonly client: Redis;
  /** A fresh key prefix, cleaned up after the file. */
  prefix(name: string): string;
}

export function useTestRedis(): RedisFixture {
  let server: TestRedis | undefined;
  let shared: Redis | undefined;
  const prefixes: string[] = [];
  beforeAll(async () => {
    server = await startTestRedis();
    shared = new Redis(server.url);
  });
  afterAll(async () => {
    if (server !== undefined) for (const p of prefixes) await cleanupPrefix(server.url, p);
    shared?.disconnect();
    await server?.stop();
  });
  const ready = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error("useTestRedis: Redis is used before beforeAll ran");
    return v;
  };
  return {
    get url() {
      return ready(server).url;
    },
    get client() {
      return ready(shared);
    },
    prefix(name) {
      const p = testPrefix(name);
      prefixes.push(p);
      return p;
    },
  };
}
