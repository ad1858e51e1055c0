package dev.rms.client.internal;

import java.util.regex.Pattern;

/** Table names the helpers put into SQL: plain lower-case identifiers, optionally qualified. */
public final class SqlNames {
  private static final Pattern TABLE = Pattern.compile(
      "([a-z_][a-z0-9_]{0,62}\\.)?[a-z_][a-z0-9_]{0,62}");

  private SqlNames() {}

  public static String table(String name) {
    if (!TABLE.matcher(name).matches()) {
      throw new IllegalArgumentException("table name '" + name + "' must match "
          + TABLE.pattern());
    }
    return name;
  }
}
