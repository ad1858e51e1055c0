/**
 * The `rms-awaiting` header (design section 6): the subscribers of a message that had not
 * acknowledged it when RMS published the record, as comma-separated app names. A consumer
 * whose app it does not name acknowledged the message already and skips the record.
 *
 * Reading it never throws and never skips on doubt: a header that is missing, repeated, empty,
 * not UTF-8, or holds anything but app names (spaces around a name are allowed) reads as not
 * known (`null`), and the record is handled as one without the header.
 */
import type { KafkaMessage } from "kafkajs";

export const HEADER_AWAITING = "rms-awaiting";
const APP_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** Whether `name` can be an RMS app's name. */
export function isAppName(name: string): boolean {
  return APP_NAME.test(name);
}

/** The app names of a record's one `rms-awaiting` header, or null (not known). */
export function awaitingOf(headers: KafkaMessage["headers"]): string[] | null {
  try {
    const raw = headers?.[HEADER_AWAITING];
    const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
    if (values.length !== 1 || values[0] === undefined || values[0] === null) return null;
    const text = typeof values[0] === "string" ? values[0] : UTF8.decode(values[0]);
    const names = text.split(",").map((name) => name.replace(/^[ \t]+|[ \t]+$/g, ""));
    return names.every(isAppName) ? names : null;
  } catch {
    return null; // whatever the headers hold: not known, so the record is handled
  }
}

/** Whether a record whose header read as `awaiting` is for `app`: yes unless the header was
 * read and does not name it (`app` acknowledged the message already). */
export function awaits(awaiting: string[] | null, app: string): boolean {
  return awaiting === null || awaiting.includes(app);
}
