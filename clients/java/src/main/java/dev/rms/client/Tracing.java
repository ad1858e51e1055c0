package dev.rms.client;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The caller's current W3C trace context, from OpenTelemetry's current span: RMS stores it with
 * a prepared message and carries it to the Kafka record, the check-back call and the ack. Only
 * the OpenTelemetry API is needed; without an SDK or outside a span there is no context.
 */
public final class Tracing {
  private Tracing() {}

  /** {@code traceparent} (and {@code tracestate} when there is one) of the current span. */
  public static Map<String, String> currentHeaders() {
    return headersOf(Context.current());
  }

  /** {@code traceparent} (and {@code tracestate}) of {@code context}'s span; empty if none. */
  public static Map<String, String> headersOf(Context context) {
    Map<String, String> headers = new LinkedHashMap<>();
    if (Span.fromContext(context).getSpanContext().isValid()) {
      W3CTraceContextPropagator.getInstance().inject(context, headers, Map::put);
    }
    return headers;
  }
}
