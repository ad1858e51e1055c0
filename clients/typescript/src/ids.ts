import { randomBytes } from "node:crypto";

/** A 26-character, time-ordered id (milliseconds, then random bits), as RMS generates them. */
export function newMessageId(now: number = Date.now()): string {
  return now.toString(16).padStart(13, "0") + randomBytes(8).toString("hex").slice(0, 13);
}
