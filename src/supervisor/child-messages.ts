import type { EngineConfig } from '../config/types.js';
import type { EnginePorts } from '../engine.js';

/** Primary ↔ child messages besides the bus (which is tagged `sy: "bus"`). */
export interface ChildStatusMessage {
  sy: 'status';
  index: number;
  peerId: string;
  /** Started and not closing: able to serve its routes. */
  ready: boolean;
  /** Its view of the cluster is in sync (false during a Redis outage; readiness does not depend on it). */
  busSynced: boolean;
  ports: EnginePorts;
  /** Workers connected to this child. */
  workers: number;
  /** Routes in this child's table (the whole cluster's). */
  routes: number;
}

/** A child that could not start (before the cluster was ever ready, the primary gives up). */
export interface ChildFatalMessage {
  sy: 'fatal';
  index: number;
  code: string;
  message: string;
}

export function isChildFatal(message: unknown): message is ChildFatalMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === 'fatal';
}

/** Primary → child: answer an admin view from your table (any child holds the whole cluster's). */
export interface AdminQueryMessage {
  sy: 'admin-query';
  id: number;
  what: 'routes' | 'workers';
}

export interface AdminAnswerMessage {
  sy: 'admin-answer';
  id: number;
  data: unknown;
}

export function isAdminQuery(message: unknown): message is AdminQueryMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === 'admin-query';
}

export function isAdminAnswer(message: unknown): message is AdminAnswerMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === 'admin-answer';
}

export interface ShutdownMessage {
  sy: 'shutdown';
}

export function isChildStatus(message: unknown): message is ChildStatusMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === 'status';
}

export function isShutdown(message: unknown): message is ShutdownMessage {
  return typeof message === 'object' && message !== null && (message as { sy?: unknown }).sy === 'shutdown';
}

/** What the primary hands a child through its environment: the validated config and its place. */
export interface ChildBootstrap {
  config: EngineConfig;
  index: number;
  nodeId: string;
  secret: string;
}

export const CHILD_BOOTSTRAP_ENV = 'SWITCHYARD_CHILD_BOOTSTRAP';
