/**
 * The wire shapes the hand-written codecs (codec.ts, mux-codec.ts) encode: a DispatchEvents message, the
 * DispatchMux down-events and its up-message (proto-loader's keepCase snake_case fields). In their own module so the codecs and
 * region-proto.ts, which uses them, do not import each other.
 */

export interface WireDone {
  finish_reason: string;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface WireDispatchEvents {
  texts: string[];
  tokens: number[];
  done: WireDone | null;
}

export interface WireMuxError {
  code: string;
  message: string;
  started: boolean;
}

/** Events of one request of the DispatchMux stream; `done` or `error` ends it. */
export interface WireMuxEvent extends WireDispatchEvents {
  rid: number;
  error: WireMuxError | null;
}

/** A generation request (DispatchRequest), as DispatchMux's `open` carries it. */
export interface WireDispatchRequest {
  id: string;
  model: string;
  kind: string;
  prompt_tokens: number;
  max_tokens: number;
  priority: number;
  body_json: string;
  batch?: boolean;
}

/** A request of the DispatchMux stream: `open` starts request `rid`, `cancel` stops it. */
export interface WireMuxUp {
  rid: number;
  open: WireDispatchRequest | null;
  cancel: boolean;
}
