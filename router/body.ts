/**
 * Reads a JSON request body from a node:http request with a byte limit enforced while reading: a declared
 * Content-Length over the limit is refused before any byte is read, and a chunked body is refused as soon as it
 * passes the limit; nothing past the limit is buffered. The refused rest is read and dropped (up to
 * DISCARD_CAP_BYTES, then the connection is cut) so that clients which write their whole body before reading the
 * response (fetch, curl) get the 413 instead of a broken pipe.
 */
import type { IncomingMessage } from "node:http";
import { TidegateError } from "../core/errors.js";
import { parseJson } from "../core/validate.js";

/**
 * Resolves the parsed JSON body. Rejects with TidegateError payload_too_large (413) past `limitBytes`,
 * invalid_json (400) for a body that is not JSON, invalid_request (400) for an empty body, cancelled when the
 * client goes away mid-body. The Content-Type is not checked (like OpenAI's API, so `curl -d` works): the bytes
 * must be JSON whatever it says.
 */
export function readJsonBody(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const tooLarge = () => new TidegateError("payload_too_large", `request body exceeds the limit of ${limitBytes} bytes`);
    const declared = req.headers["content-length"];
    if (declared !== undefined && Number(declared) > limitBytes) {
      discardRest(req);
      return reject(tooLarge());
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const finish = (err: TidegateError | undefined, value?: unknown) => {
      if (settled) return;
      settled = true;
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onAborted);
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > limitBytes) {
        chunks.length = 0;
        finish(tooLarge());
        discardRest(req);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      if (bytes === 0) return finish(new TidegateError("invalid_request", "request body is empty; expected a JSON object"));
      const text = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks, bytes).toString("utf8");
      try {
        finish(undefined, parseJson(text, "request body"));
      } catch (err) {
        finish(err instanceof TidegateError ? err : new TidegateError("invalid_json", "request body is not valid JSON", { cause: err }));
      }
    };
    const onError = (err: Error) => finish(new TidegateError("cancelled", "client connection failed while sending the body", { cause: err }));
    const onAborted = () => finish(new TidegateError("cancelled", "client went away while sending the body"));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("aborted", onAborted);
  });
}

/** How much of a refused body is read and dropped before the connection is cut. */
export const DISCARD_CAP_BYTES = 64 * 1024 * 1024;

/** Reads and drops the rest of a refused body; past `capBytes` the socket is destroyed. */
function discardRest(req: IncomingMessage, capBytes = DISCARD_CAP_BYTES): void {
  let bytes = 0;
  req.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > capBytes) req.socket.destroy();
  });
  req.on("error", () => {}); // the client may cut the upload once it has its 413; nothing is left to report
  req.resume();
}
