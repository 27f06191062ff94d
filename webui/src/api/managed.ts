// Terminals managed from the hub: at the hub, each managed terminal's report and the config versions made for it;
// at a terminal, the hub that manages it and joining one.
import { api, unwrap } from './client';
import type { components } from './schema.gen';

type S = components['schemas'];
export type ManagedVersion = S['ManagedVersionOut'];
export type ManagedState = ManagedVersion['state'];
export type ManagedVersionList = S['ManagedVersionList'];
export type ManagedVersionIn = S['ManagedVersionIn'];
export type TerminalDetail = S['TerminalDetail'];
export type SiteReport = S['SiteReport'];
export type ManagedStatus = S['ManagedStatus'];
export type JoinIn = S['JoinIn'];

/** The sections a hub may set on a terminal it manages (the API refuses any other; its ManagedVersionIn says so). */
export const MANAGED_SECTIONS = ['bypass', 'cache', 'classes', 'dns', 'hybla', 'quic', 'satellite', 'shaping', 'splitter', 'sites'] as const;

export const managedKeys = {
  detail: (name: string) => ['managed', 'terminal', name] as const,
  versions: (name: string) => ['managed', 'versions', name] as const,
  status: ['managed', 'status'] as const,
};

const byName = (name: string) => ({ params: { path: { name } } });

export const managedEndpoints = {
  terminal: (name: string) => unwrap(api.GET('/api/v1/peer/terminals/{name}', byName(name))),
  versions: (name: string) => unwrap(api.GET('/api/v1/peer/terminals/{name}/versions', byName(name))),
  postVersion: (name: string, body: ManagedVersionIn) => unwrap(api.POST('/api/v1/peer/terminals/{name}/versions', { ...byName(name), body })),
  cancelVersion: (name: string, versionId: number) =>
    unwrap(api.POST('/api/v1/peer/terminals/{name}/versions/{version_id}/cancel', { params: { path: { name, version_id: versionId } } })),
  status: () => unwrap(api.GET('/api/v1/managed/status')),
  join: (body: JoinIn) => unwrap(api.POST('/api/v1/managed/join', { body })),
};
