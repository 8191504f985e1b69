/**
 * `RegionLink.submit` over a link's own stream: what every streaming adapter (in-process, gRPC) offers as the
 * callback shape of `dispatch`. The stream is read to its end in the background: `onFirstToken` at the first event,
 * `onToken` per text piece, `onFinish` and `onDone` at `done` (clock times), `onError` when the stream fails or ends
 * without `done` (aborting the signal given to the stream makes it fail). Nothing is thrown: a stream reports even
 * its refusals after the call returns.
 */
import { TidegateError } from "../../core/errors.js";
import type { EngineEvent, LinkCallbacks } from "../../core/ports.js";

/** Reads `stream` to its end, reporting through `callbacks` at `now()` times (ms; see the file comment). */
export function submitOverStream(stream: AsyncIterable<EngineEvent>, now: () => number, callbacks: LinkCallbacks): void {
  void (async () => {
    let first = true;
    let generated = 0;
    try {
      for await (const ev of stream) {
        if (first) {
          first = false;
          callbacks.onFirstToken?.(now());
        }
        if (ev.type === "token") {
          generated += ev.tokens;
          callbacks.onToken?.(ev.text, ev.tokens);
          continue;
        }
        callbacks.onFinish?.(ev.finishReason, ev.usage);
        callbacks.onDone?.(now(), generated);
        return;
      }
      throw new TidegateError("upstream_error", "the region's stream ended without a done event");
    } catch (err) {
      callbacks.onError?.(now(), err);
    }
  })();
}
