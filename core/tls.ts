/**
 * Optional TLS with client certificates on every gRPC link between tiers (DESIGN "Errors, limits, security"): global
 * router and planner → region, node agent → region (announce), region → node agent, engine-sim → its agent. Both
 * sides name three PEM files: the CA that signs peers, their own certificate chain and private key. Servers require
 * and verify the client's certificate; clients verify the server's against the CA — against `serverName` when the
 * address dialled is not a name the certificate carries (agents are dialled by node IP).
 */
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { TidegateError } from "./errors.js";

/** Paths of PEM files. */
export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** The name the server's certificate must carry, when it is not the host dialled (e.g. "tidegate-agent"). */
  serverName?: string;
}

/** Channel options that check the server's certificate against `tls.serverName` (none without one). */
export function tlsChannelOptions(tls?: TlsFiles): grpc.ChannelOptions {
  if (tls?.serverName === undefined) return {};
  return { "grpc.ssl_target_name_override": tls.serverName, "grpc.default_authority": tls.serverName };
}

/** The --tls-ca/--tls-cert/--tls-key flags together (and --tls-server-name where a command has it), or none. */
export function tlsFromFlags(flags: Record<string, unknown>): TlsFiles | undefined {
  const given = ["tls-ca", "tls-cert", "tls-key"].filter((k) => typeof flags[k] === "string").length;
  if (given === 0) {
    if (typeof flags["tls-server-name"] === "string") throw new TidegateError("invalid_request", "--tls-server-name needs --tls-ca, --tls-cert and --tls-key");
    return undefined;
  }
  if (given !== 3) throw new TidegateError("invalid_request", "--tls-ca, --tls-cert and --tls-key go together");
  return { caFile: String(flags["tls-ca"]), certFile: String(flags["tls-cert"]), keyFile: String(flags["tls-key"]), ...(typeof flags["tls-server-name"] === "string" ? { serverName: flags["tls-server-name"] } : {}) };
}

/** The flags as argv (to hand a child process the same TLS files). */
export function tlsArgs(tls?: TlsFiles): string[] {
  if (tls === undefined) return [];
  return ["--tls-ca", tls.caFile, "--tls-cert", tls.certFile, "--tls-key", tls.keyFile, ...(tls.serverName === undefined ? [] : ["--tls-server-name", tls.serverName])];
}

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TidegateError("invalid_config", `cannot read TLS ${what} ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
  }
}

/** The CA, certificate and key as node:tls options (the framed dispatch connection, region/link/mux-socket.ts). */
export function tlsContextOptions(tls: TlsFiles): { ca: Buffer; cert: Buffer; key: Buffer } {
  return { ca: read(tls.caFile, "CA"), cert: read(tls.certFile, "certificate"), key: read(tls.keyFile, "key") };
}

/** Insecure without `tls`; otherwise TLS that requires a client certificate signed by the CA. */
export function serverCredentials(tls?: TlsFiles): grpc.ServerCredentials {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(read(tls.caFile, "CA"), [{ cert_chain: read(tls.certFile, "certificate"), private_key: read(tls.keyFile, "key") }], true);
}

/** Insecure without `tls`; otherwise TLS verifying the server against the CA and presenting our certificate. */
export function channelCredentials(tls?: TlsFiles): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(read(tls.caFile, "CA"), read(tls.keyFile, "key"), read(tls.certFile, "certificate"));
}
