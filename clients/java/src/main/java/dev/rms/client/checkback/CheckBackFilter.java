package dev.rms.client.checkback;

import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The check-back endpoint as a Jakarta Servlet filter (Servlet 6: Spring Boot 3+, Tomcat 10.1+,
 * Jetty 12): it answers {@code POST <path>} itself and passes every other request down the
 * chain. The servlet API is the container's, so this library pulls in nothing for it. In
 * Spring Boot:
 *
 * <pre>{@code
 * @Bean
 * FilterRegistrationBean<CheckBackFilter> rmsCheckBack(CheckBackHandler handler) {
 *   return new FilterRegistrationBean<>(new CheckBackFilter(handler, "/rms/check"));
 * }
 * }</pre>
 */
public final class CheckBackFilter implements Filter {
  public static final String DEFAULT_PATH = "/rms/check";

  private final CheckBackHandler handler;
  private final String path;

  public CheckBackFilter(CheckBackHandler handler, String path) {
    this.handler = handler;
    this.path = path;
  }

  public CheckBackFilter(CheckBackHandler handler) {
    this(handler, DEFAULT_PATH);
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain)
      throws IOException, ServletException {
    if (!(request instanceof HttpServletRequest http)
        || !(response instanceof HttpServletResponse answer)
        || !"POST".equals(http.getMethod()) || !path.equals(pathOf(http))) {
      chain.doFilter(request, response);
      return;
    }
    byte[] body = CheckBackHttpHandler.readAtMost(http.getInputStream(),
        CheckBackHttpHandler.MAX_BODY_BYTES);
    CheckBackResponse result = body == null
        ? CheckBackHandler.problem(413, "Body too large", "a check-back body is small")
        : handler.handle(headers(http), body);
    answer.setStatus(result.status());
    answer.setContentType(result.contentType());
    answer.setContentLength(result.body().length);
    answer.getOutputStream().write(result.body());
  }

  private static String pathOf(HttpServletRequest request) {
    String uri = request.getRequestURI();
    String context = request.getContextPath();
    return context != null && uri.startsWith(context) ? uri.substring(context.length()) : uri;
  }

  private static Map<String, List<String>> headers(HttpServletRequest request) {
    Map<String, List<String>> headers = new LinkedHashMap<>();
    for (String name : Collections.list(request.getHeaderNames())) {
      headers.put(name, Collections.list(request.getHeaders(name)));
    }
    return headers;
  }
}
