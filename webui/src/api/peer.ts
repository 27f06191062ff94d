// The peer path's trust, as the API serves it: the terminals enrolled at a hub, each gateway's own identity, a
// terminal's hub. Every change is a new config version the API applies at once.
import { api, unwrap } from './client';
import type { components } from './schema.gen';

type S = components['schemas'];
export type TerminalList = S['TerminalList'];
export type Terminal = S['TerminalOut'];
export type TerminalIn = S['TerminalIn'];
export type TerminalChange = S['TerminalChangeOut'];
export type IdentityList = S['IdentityList'];
export type Identity = S['IdentityOut'];
export type HubIn = S['HubIn'];
export type PeerStatus = S['PeerStatus'];
export type EnrollmentTokenIn = S['EnrollmentTokenIn'];
export type EnrollmentToken = S['EnrollmentTokenOut'];
export type EnrollmentTokenCreated = S['EnrollmentTokenCreated'];

export const peerKeys = {
  terminals: ['peer', 'terminals'] as const,
  identity: ['peer', 'identity'] as const,
  enrollmentTokens: ['peer', 'enrollment-tokens'] as const,
};

/** `sha256:` and 64 lowercase hex digits: what a gateway's dashboard shows as its identity. */
export const FINGERPRINT_RE = /^sha256:[0-9a-f]{64}$/;

/** A fingerprint short enough for a table cell: the head and the tail. */
export function shortFingerprint(fp: string): string {
  return fp.length > 24 ? `${fp.slice(0, 15)}…${fp.slice(-6)}` : fp;
}

export const peerEndpoints = {
  terminals: () => unwrap(api.GET('/api/v1/peer/terminals')),
  enroll: (body: TerminalIn) => unwrap(api.POST('/api/v1/peer/terminals', { body })),
  revoke: (name: string) => unwrap(api.DELETE('/api/v1/peer/terminals/{name}', { params: { path: { name } } })),
  addFingerprint: (name: string, fingerprint: string) =>
    unwrap(api.POST('/api/v1/peer/terminals/{name}/fingerprints', { params: { path: { name } }, body: { fingerprint, comment: '' } })),
  dropFingerprint: (name: string, fingerprint: string) =>
    unwrap(api.DELETE('/api/v1/peer/terminals/{name}/fingerprints/{fingerprint}', { params: { path: { name, fingerprint } } })),
  identity: () => unwrap(api.GET('/api/v1/peer/identity')),
  rotateIdentity: () => unwrap(api.POST('/api/v1/peer/identity/rotate')),
  commitIdentity: () => unwrap(api.POST('/api/v1/peer/identity/commit')),
  setHub: (body: HubIn) => unwrap(api.PUT('/api/v1/peer/hub', { body })),
  enrollmentTokens: () => unwrap(api.GET('/api/v1/peer/enrollment-tokens')),
  createEnrollmentToken: (body: EnrollmentTokenIn) => unwrap(api.POST('/api/v1/peer/enrollment-tokens', { body })),
  revokeEnrollmentToken: (token_id: number) =>
    unwrap(api.DELETE('/api/v1/peer/enrollment-tokens/{token_id}', { params: { path: { token_id } } })),
};
