/**
 * Principals: who registered a function or a binding, cluster-wide (src/workers/worker-session.ts makes
 * them). Registrations through a listener with `rbac` carry a restricted principal: their middleware
 * runs only on their own routes, and no other principal can join what they hold (docs/security.md).
 */

const RESTRICTED_PREFIX = 'rbac-';

/** The principal of registrations made before principals existed (a peer of an older version): the main listener's. */
export const MAIN_PRINCIPAL = 'listener-0';

/** A listener's principal: `listener-N`, or `rbac-listener-N` for one with `rbac`. */
export function listenerPrincipal(index: number, restricted: boolean): string {
  return `${restricted ? RESTRICTED_PREFIX : ''}listener-${index}`;
}

/** Whether registrations of this principal came through a listener with `rbac`. */
export function isRestricted(principal: string | undefined): boolean {
  return principal !== undefined && principal.startsWith(RESTRICTED_PREFIX);
}
