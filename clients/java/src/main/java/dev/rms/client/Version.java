package dev.rms.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/** This library's release, read from the POM's version that the build wrote into the jar. */
public final class Version {
  /** The release, for example {@code 0.2.0}. */
  public static final String RELEASE = load();

  /** Sent with every request to RMS, so its access logs name the library and its release. */
  public static final String USER_AGENT = "rms-client-java/" + RELEASE;

  private Version() {}

  private static String load() {
    try (InputStream in = Version.class.getResourceAsStream("version.properties")) {
      if (in == null) {
        throw new IllegalStateException("dev/rms/client/version.properties is missing from the jar");
      }
      Properties properties = new Properties();
      properties.load(in);
      return properties.getProperty("version");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
