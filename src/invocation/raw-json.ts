/**
 * A payload that is already JSON text. A forwarded call arrives as JSON and goes to the worker as
 * JSON, so the owning peer splices the text into the worker frame instead of parsing it and
 * serialising it again. Invokers treat it as the value the text denotes.
 *
 * A request whose JSON body arrived as valid UTF-8 is held in three parts instead (`parts`): the text
 * before the body, the body's own bytes, the text after it. A worker connection copies the bytes into
 * its frame as they are (encodeInvocationBytes): a 64 KiB body was decoded to text, spliced into the
 * frame's text, flattened and encoded back to the same bytes (issue 26 point 6). Anything else that
 * asks for `json` gets the same text, built once.
 */
export interface JsonParts {
  head: string;
  /** UTF-8 bytes of valid JSON text (checked, and valid UTF-8: decoding them loses nothing). */
  bytes: Buffer;
  tail: string;
}

export class RawJson {
  private text: string | undefined;
  readonly parts: JsonParts | undefined;

  constructor(json: string, parts?: JsonParts) {
    this.text = parts === undefined ? json : undefined;
    this.parts = parts;
  }

  /** The JSON text `head` + `bytes` decoded + `tail`, held as those parts until the text is asked for. */
  static spliced(head: string, bytes: Buffer, tail: string): RawJson {
    return new RawJson('', { head, bytes, tail });
  }

  get json(): string {
    if (this.text === undefined) {
      const parts = this.parts as JsonParts;
      this.text = `${parts.head}${parts.bytes.toString('utf8')}${parts.tail}`;
    }
    return this.text;
  }
}

export function toJson(data: unknown): string {
  return data instanceof RawJson ? data.json : (JSON.stringify(data) ?? 'null');
}
