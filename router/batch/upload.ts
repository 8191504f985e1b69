/**
 * Reading a multipart upload with a byte limit enforced while streaming: a declared Content-Length over the limit
 * is refused before any byte is read, and a body without one is cut off as soon as it passes the limit, so an
 * oversized upload never sits in memory beyond the limit.
 */
import { TidegateError } from "../../core/errors.js";

/** Room for multipart boundaries and part headers on top of the file limit. */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

/** Reads `req`'s body up to `limitBytes`; throws payload_too_large (413) past it. */
export async function readLimited(req: Request, limitBytes: number): Promise<Buffer> {
  const tooLarge = () => new TidegateError("payload_too_large", `upload exceeds the limit of ${limitBytes} bytes`);
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > limitBytes) throw tooLarge();
  if (req.body === null) return Buffer.alloc(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    if (bytes > limitBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, bytes);
}

/** A parsed upload: the `purpose` field and the `file` part. */
export interface Upload {
  purpose: string;
  filename: string;
  content: Buffer;
}

/**
 * Parses a multipart/form-data body (already size-limited). Throws invalid_request (400) for a missing or wrong
 * content type, a malformed body, or a missing `file` / `purpose` part.
 */
export async function parseUpload(contentType: string | null, body: Buffer): Promise<Upload> {
  if (contentType === null || !/^multipart\/form-data\s*;/i.test(contentType)) {
    throw new TidegateError("invalid_request", `Content-Type must be multipart/form-data with a boundary, got ${JSON.stringify((contentType ?? "").slice(0, 80))}`);
  }
  let form: FormData;
  try {
    form = await new Response(body, { headers: { "content-type": contentType } }).formData();
  } catch (err) {
    throw new TidegateError("invalid_request", "malformed multipart/form-data body", { cause: err });
  }
  const purpose = form.get("purpose");
  if (typeof purpose !== "string" || purpose.length === 0) throw new TidegateError("invalid_request", "missing required field purpose", { param: "purpose" });
  const file = form.get("file");
  if (file === null || typeof file === "string") throw new TidegateError("invalid_request", "missing required file part `file`", { param: "file" });
  return { purpose, filename: file.name || "upload.jsonl", content: Buffer.from(await file.arrayBuffer()) };
}
