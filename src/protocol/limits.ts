/**
 * The sizes a worker's registrations may take (docs/security.md#limits), checked before anything is
 * stored or published. iii has no such limits; without them a restricted tenant could grow a process
 * until it died, and a process's snapshot past what one message between processes can carry.
 */
export const REGISTRATION_LIMITS = Object.freeze({
  /** Function, trigger, trigger type and service ids, and the function ids they name (characters). */
  idChars: 1024,
  /** invocation_id, previous_worker_id, reattach_token, traceparent (characters). */
  tokenChars: 256,
  /** baggage (characters; W3C's limit for the header). */
  baggageChars: 8192,
  /** description, service name (characters). */
  descriptionChars: 16 * 1024,
  /** One registration frame, and one registration as stored (JSON: metadata, config and formats included). */
  registrationBytes: 256 * 1024,
  /** Everything one worker connection has registered (JSON). */
  connectionBytes: 8 * 1024 * 1024,
  /** Everything every worker connected to one process has registered: bounds its snapshot (JSON). */
  processBytes: 16 * 1024 * 1024,
  /** Each field a worker tells about itself (engine::workers::register: name, runtime, version, os). */
  workerInfoChars: 256,
});
