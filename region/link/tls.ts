/**
 * Optional TLS with client certificates between the global router and regions (DESIGN "Errors, limits, security").
 * Both sides name three PEM files: the CA that signs peers, their own certificate chain and private key. The region
 * requires and verifies the router's client certificate; the router verifies the region's against the CA.
 */
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { TidegateError } from "../../core/errors.js";

/** Paths of PEM files. */
export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

function read(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TidegateError("invalid_config", `cannot read TLS ${what} ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
  }
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
