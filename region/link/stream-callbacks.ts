/**
 * `RegionLink.submit`'s callbacks as a push sink (core/push.ts): what every link adapter offers as the callback shape
 * of `dispatch`. `onFirstToken` at the first event, `onToken` per text piece, `onFinish` and `onDone` at `done`
 * (clock times), `onError` when the request fails or its stream ends without `done` (aborting the signal given to it
 * makes it fail). Nothing is thrown: a request reports even its refusals through `onError`.
 */
import { pushFrom, type EventSink } from "../../core/push.js";
import type { EngineEvent, LinkCallbacks } from "../../core/ports.js";

/** A sink reporting one request's events through `callbacks` at `now()` times (ms; see the file comment). */
export function callbackSink(now: () => number, callbacks: LinkCallbacks): EventSink {
  let first = true;
  let generated = 0;
  return {
    event(ev) {
      if (first) {
        first = false;
        callbacks.onFirstToken?.(now());
      }
      if (ev.type === "token") {
        generated += ev.tokens;
        callbacks.onToken?.(ev.text, ev.tokens);
        return true;
      }
      callbacks.onFinish?.(ev.finishReason, ev.usage);
      callbacks.onDone?.(now(), generated);
      return true;
    },
    fail(err) {
      callbacks.onError?.(now(), err);
    },
  };
}

/** Reads `stream` to its end in the background, reporting through `callbacks` (a link whose own shape is a stream). */
export function submitOverStream(stream: AsyncIterable<EngineEvent>, now: () => number, callbacks: LinkCallbacks): void {
  pushFrom(stream, callbackSink(now, callbacks));
}
