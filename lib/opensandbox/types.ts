/** Named aliases over the generated OpenSandbox Lifecycle API types (lib/opensandbox/generated). */
import type { components } from './generated/lifecycle.ts';

type Schemas = components['schemas'];
export type Sandbox = Schemas['Sandbox'];
export type SandboxStatus = Schemas['SandboxStatus'];
export type CreateSandboxRequest = Schemas['CreateSandboxRequest'];
export type CreateSandboxResponse = Schemas['CreateSandboxResponse'];
export type ListSandboxesResponse = Schemas['ListSandboxesResponse'];
export type PaginationInfo = Schemas['PaginationInfo'];
export type ErrorResponse = Schemas['ErrorResponse'];
export type ImageSpec = Schemas['ImageSpec'];

/** The lifecycle states the spec documents; the spec types state as an open string ("new values may be added"). */
export const KNOWN_STATES = [
  'Pending',
  'Running',
  'Pausing',
  'Paused',
  'Resuming',
  'Stopping',
  'Terminated',
  'Failed',
] as const;
export type KnownState = (typeof KNOWN_STATES)[number];
/** An open union: known states keep their literal types, unknown ones are plain strings. */
export type SandboxState = KnownState | (string & Record<never, never>);

/** The API key header (securityScheme apiKeyAuth). */
export const API_KEY_HEADER = 'OPEN-SANDBOX-API-KEY';
/** The API's base path under the endpoint (servers: http://localhost:8080/v1). */
export const BASE_PATH = '/v1';
/** Metadata keys with this prefix are reserved by OpenSandbox. */
export const RESERVED_METADATA_PREFIX = 'opensandbox.io/';
