import { context, createTraceState, isSpanContextValid, trace, type Context } from "@opentelemetry/api";

/**
 * The W3C trace context headers (`traceparent`, `tracestate`) of the span current in `ctx`
 * (the active OpenTelemetry context by default); empty outside a span. RMS stores them with a
 * prepared message and passes them on to the Kafka record and the check-back call.
 */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const span = trace.getSpanContext(ctx);
  if (span === undefined || !isSpanContextValid(span)) return {};
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, "0");
  const headers: Record<string, string> = {
    traceparent: `00-${span.traceId}-${span.spanId}-${flags}`,
  };
  const state = span.traceState?.serialize();
  if (state) headers.tracestate = state;
  return headers;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** `base` with the remote span of a W3C `traceparent` (and `tracestate`) as its parent, or
 * `base` itself when the header is absent or invalid. */
export function contextFromHeaders(headers: Record<string, string | undefined>,
                                   base: Context = context.active()): Context {
  const match = TRACEPARENT.exec((headers.traceparent ?? "").trim().toLowerCase());
  if (match === null) return base;
  const [, version, traceId, spanId, flags, rest] = match as unknown as string[];
  if (version === "ff" || (version === "00" && rest) || !isSpanContextValid({ traceId: traceId!, spanId: spanId!, traceFlags: 0 })) {
    return base;
  }
  const state = headers.tracestate ? createTraceState(headers.tracestate) : undefined;
  return trace.setSpanContext(base, {
    traceId: traceId!, spanId: spanId!, traceFlags: parseInt(flags!, 16), isRemote: true,
    ...(state ? { traceState: state } : {}),
  });
}
