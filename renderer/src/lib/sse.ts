/**
 * A server-sent events parser (the WHATWG event-stream format) for a stream read with fetch:
 * EventSource cannot send an Authorization header, so the HTTP bridge reads /api/events itself.
 * Feed it text in whatever chunks the network delivers; it returns the complete messages.
 */
import { APP_EVENT_TYPES, type AppEvent, type AppEventType } from '../../../electron/core/contract.js';

export interface SseMessage {
  /** The `event:` field, or "message" when the frame had none. */
  event: string;
  /** `data:` lines joined with "\n". */
  data: string;
  /** The last `id:` seen on the stream (it persists across messages), or null. */
  lastEventId: string | null;
}

export class SseParser {
  private buffer = '';
  /** The previous chunk ended in "\r": a "\n" starting the next one belongs to that line end. */
  private pendingCr = false;
  private atStreamStart = true;
  private eventType = '';
  private dataLines: string[] = [];
  private hasData = false;
  private lastEventId: string | null = null;
  /** The `retry:` field: the server's reconnection delay in ms. */
  retryMs: number | null = null;

  push(chunk: string): SseMessage[] {
    let text = chunk;
    if (text.length === 0) return [];
    if (this.atStreamStart) {
      this.atStreamStart = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.pendingCr = false;
    this.buffer += text;

    const messages: SseMessage[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const c = this.buffer.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      const line = this.buffer.slice(start, i);
      if (c === 0x0d) {
        if (i + 1 < this.buffer.length) {
          if (this.buffer.charCodeAt(i + 1) === 0x0a) i++;
        } else {
          this.pendingCr = true;
        }
      }
      start = i + 1;
      const message = this.line(line);
      if (message !== null) messages.push(message);
    }
    this.buffer = this.buffer.slice(start);
    return messages;
  }

  private line(line: string): SseMessage | null {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        break;
      case 'data':
        this.dataLines.push(value);
        this.hasData = true;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        // Unknown fields are ignored, as the format requires.
        break;
    }
    return null;
  }

  private dispatch(): SseMessage | null {
    const message: SseMessage | null = this.hasData ? { event: this.eventType === '' ? 'message' : this.eventType, data: this.dataLines.join('\n'), lastEventId: this.lastEventId } : null;
    this.eventType = '';
    this.dataLines = [];
    this.hasData = false;
    return message;
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isEventType = (value: unknown): value is AppEventType => typeof value === 'string' && (APP_EVENT_TYPES as readonly string[]).includes(value);

/**
 * An SSE message as an AppEvent, or null for anything else (a keep-alive, an event type this
 * renderer does not know, a frame whose `event:` disagrees with its payload, bad JSON). Shapes
 * inside the payload are the core's to guarantee; only the discriminant is checked here.
 */
export function decodeAppEvent(message: SseMessage): AppEvent | null {
  let payload: unknown;
  try {
    payload = JSON.parse(message.data);
  } catch {
    return null;
  }
  if (!isRecord(payload) || !isEventType(payload['type'])) return null;
  if (message.event !== 'message' && message.event !== payload['type']) return null;
  return payload as unknown as AppEvent;
}
