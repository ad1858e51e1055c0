/**
 * Which app an API key acts as (`GET /v1/apps/me`). RMS names the apps that still owe a
 * message in its records' `rms-awaiting` header; a consumer given another app name than its
 * key's would find that name in none of them and skip every record, so the consumer checks
 * the name it was given against its key's app at start and refuses to run on a mismatch.
 */
import { RmsError, RmsUnavailableError } from "./errors.js";

/** The consumer's app name is not the app of its API key, or RMS knows no such key. */
export class WrongAppError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WrongAppError";
  }
}

/** An acker that can tell the app its API key acts as (null: RMS cannot tell). */
export interface KeyOwner {
  appOfKey(): Promise<string | null>;
}

/** The app name of `GET /v1/apps/me`; null when RMS cannot be reached or lacks the endpoint
 * (404); a {@link WrongAppError} on 401, a key RMS does not know. */
export async function appOfKey(get: () => Promise<{ name?: unknown }>): Promise<string | null> {
  try {
    const app = await get();
    return typeof app.name === "string" ? app.name : null;
  } catch (error) {
    if (error instanceof RmsError && !(error instanceof RmsUnavailableError) && error.status === 401) {
      throw new WrongAppError(`RMS does not know this consumer's API key: ${error.detail}`);
    }
    if (error instanceof RmsError) return null;
    throw error;
  }
}

/** Refuses `app` when it is not the app of the acker's key; an acker without a key, or an RMS
 * that cannot tell, is logged and let through. */
export async function checkApp(app: string, acker: object): Promise<void> {
  if (!("appOfKey" in acker) || typeof acker.appOfKey !== "function") return;
  let actual: string | null;
  try {
    actual = await (acker as KeyOwner).appOfKey();
  } catch (error) {
    if (error instanceof WrongAppError) console.error(`rms: wrong consumer app: ${error.message}`);
    throw error;
  }
  if (actual === null) {
    console.warn("rms: could not check the consumer's app against its API key", { app });
  } else if (actual !== app) {
    const line = `this consumer is configured as app ${JSON.stringify(app)}, but its API key is app `
      + `${JSON.stringify(actual)}'s: it would skip every record RMS awaits from ${JSON.stringify(actual)}; `
      + `refusing to run (set app to ${JSON.stringify(actual)}, or use that app's key)`;
    console.error(`rms: wrong consumer app: ${line}`);
    throw new WrongAppError(line);
  }
}
