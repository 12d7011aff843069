/**
 * A payload that is already JSON text. A forwarded call arrives as JSON and goes to the worker as
 * JSON, so the owning peer splices the text into the worker frame instead of parsing it and
 * serialising it again. Invokers treat it as the value the text denotes.
 */
export class RawJson {
  constructor(readonly json: string) {}
}

export function toJson(data: unknown): string {
  return data instanceof RawJson ? data.json : (JSON.stringify(data) ?? 'null');
}
