/**
 * Thin adapters of the check-back handler: a Node `http` request listener and an Express
 * middleware. Both read the raw body (the signature covers its exact bytes), so mount the
 * Express middleware before any body parser, or after `express.raw()`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

import { problemAnswer, type CheckBackAnswer, type CheckBackHandler } from "./checkback.js";

/** Bodies above this are refused with 413 (RMS's check-back bodies are small). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

export interface AdapterOptions {
  maxBodyBytes?: number;
  /** Told when answering failed unexpectedly (the Node listener then answers 500, which RMS
   * counts as `unknown` and asks again; Express gets the error through `next`). */
  onError?: (error: unknown) => void;
}

class BodyTooLarge extends Error {}

async function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    const piece = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
    size += piece.length;
    if (size > limit) throw new BodyTooLarge(`body over ${limit} bytes`);
    chunks.push(piece);
  }
  return Buffer.concat(chunks);
}

function write(response: ServerResponse, answer: CheckBackAnswer): void {
  response.writeHead(answer.status, { ...answer.headers, "content-length": Buffer.byteLength(answer.body) });
  response.end(answer.body);
}

async function serve(handler: CheckBackHandler, request: IncomingMessage, body: Buffer | null,
                     response: ServerResponse, limit: number): Promise<void> {
  if (request.method !== "POST") {
    response.setHeader("allow", "POST");
    write(response, problemAnswer(405, "Method not allowed", "RMS check-backs are POST requests"));
    return;
  }
  let raw: Buffer;
  try {
    raw = body ?? await readBody(request, limit);
  } catch (error) {
    if (!(error instanceof BodyTooLarge)) throw error;
    response.setHeader("connection", "close");
    write(response, problemAnswer(413, "Body too large", error.message));
    return;
  }
  write(response, await handler(request.headers, raw));
}

/** A Node `http` request listener answering RMS's check-backs on every path it is given:
 * `http.createServer(nodeCheckBackListener(handler))`, or call it from your own router. */
export function nodeCheckBackListener(handler: CheckBackHandler, options: AdapterOptions = {}
): (request: IncomingMessage, response: ServerResponse) => void {
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (request, response) => {
    serve(handler, request, null, response, limit).catch((error: unknown) => {
      options.onError?.(error);
      if (!response.headersSent) write(response, problemAnswer(500, "Check-back failed", "the check-back handler failed; RMS asks again later"));
      else response.destroy();
    });
  };
}

/** The request as Express gives it: a Node request, maybe with a body a parser already read. */
export type ExpressLikeRequest = IncomingMessage & { body?: unknown };

/** An Express middleware answering RMS's check-backs: `app.post("/rms/check",
 * expressCheckBack(handler))`. Mount it before `express.json()`, or after `express.raw()`. */
export function expressCheckBack(handler: CheckBackHandler, options: AdapterOptions = {}
): (request: ExpressLikeRequest, response: ServerResponse, next: (error?: unknown) => void) => void {
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (request, response, next) => {
    const parsed = request.body;
    let body: Buffer | null = null;
    if (Buffer.isBuffer(parsed)) body = parsed;
    else if (typeof parsed === "string") body = Buffer.from(parsed);
    else if (parsed !== undefined && request.readableEnded) {
      next(new Error("the RMS check-back middleware needs the raw body: mount it before "
        + "express.json() or after express.raw()"));
      return;
    }
    serve(handler, request, body, response, limit).catch(next);
  };
}
