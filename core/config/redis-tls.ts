/**
 * `queue.redisTls` and Redis URLs as the config parser reads them (core/config/queue-section.ts), kept apart from
 * core/redis.ts so that parsing a config does not load ioredis (a command that stops at a port in use, or only
 * prints its config, never needs it). core/redis.ts re-exports them.
 */
import type { ObjectReader } from "../validate.js";

export interface RedisTlsConfig {
  /** PEM file of the CA that signed Redis's certificate (default: the system's CAs). */
  caFile?: string;
  /** PEM client certificate and key, for a Redis that requires them (`tls-auth-clients yes`). */
  certFile?: string;
  keyFile?: string;
  /** Name to check Redis's certificate against, when it differs from the URL's host (an IP, say). */
  serverName?: string;
}

/** Reads `queue.redisTls` (validated; paths are read when a client opens). */
export function readRedisTls(r: ObjectReader): RedisTlsConfig {
  const caFile = r.optionalString("caFile");
  const certFile = r.optionalString("certFile");
  const keyFile = r.optionalString("keyFile");
  const serverName = r.optionalString("serverName");
  if ((certFile === undefined) !== (keyFile === undefined)) r.fail(certFile === undefined ? "certFile" : "keyFile", "certFile and keyFile go together");
  r.done();
  return {
    ...(caFile === undefined ? {} : { caFile }),
    ...(certFile === undefined ? {} : { certFile }),
    ...(keyFile === undefined ? {} : { keyFile }),
    ...(serverName === undefined ? {} : { serverName }),
  };
}

/** `url` without its user and password (for messages and logs). */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/]*@/i, "$1");
}
