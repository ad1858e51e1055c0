package dev.rms.client.consumer;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.common.header.Header;

/**
 * The {@code rms-awaiting} header (design section 6): the subscribers of a message that had not
 * acknowledged it when RMS published the record, as comma-separated app names. A consumer whose
 * app it does not name acknowledged the message already and skips the record.
 *
 * <p>Reading it never throws and never skips on doubt: a header that is missing, repeated,
 * empty, not UTF-8, or holds anything but app names (spaces around a name are allowed) reads as
 * not known ({@code null}), and the record is handled as one without the header.
 */
public final class AwaitingHeader {
  public static final String NAME = "rms-awaiting";
  private static final Pattern APP_NAME = Pattern.compile("[a-z0-9][a-z0-9_-]{0,62}");

  private AwaitingHeader() {}

  /** Whether {@code name} can be an RMS app's name. */
  public static boolean validAppName(String name) {
    return name != null && APP_NAME.matcher(name).matches();
  }

  /** The app names of the record's one {@code rms-awaiting} header, or null (not known). */
  public static Set<String> read(Iterable<Header> headers) {
    try {
      List<byte[]> values = new ArrayList<>();
      for (Header header : headers) {
        if (NAME.equals(header.key())) {
          values.add(header.value());
        }
      }
      return values.size() == 1 ? names(values.get(0)) : null;
    } catch (RuntimeException unreadable) { // whatever the headers hold: not known
      return null;
    }
  }

  private static Set<String> names(byte[] value) {
    if (value == null) {
      return null;
    }
    String text;
    try {
      text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(value))
          .toString();
    } catch (CharacterCodingException notUtf8) {
      return null;
    }
    Set<String> names = new LinkedHashSet<>();
    for (String part : text.split(",", -1)) {
      String name = part.replaceAll("^[ \\t]+|[ \\t]+$", "");
      if (!validAppName(name)) {
        return null;
      }
      names.add(name);
    }
    return Set.copyOf(names);
  }

  /** Whether a record whose header read as {@code awaiting} is for {@code app}. */
  public static boolean awaits(Set<String> awaiting, String app) {
    return awaiting == null || awaiting.contains(app);
  }
}
