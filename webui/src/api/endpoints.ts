// Every API call the dashboard makes, in one place, typed by the schema generated from api/openapi.json.
import { api, unwrap } from './client';
import { csrfToken } from './csrf';
import type { components, operations } from './schema.gen';

type S = components['schemas'];
export type User = S['UserOut'];
export type Role = User['role'];
export type PolicyIssue = S['PolicyIssue'];
export type ChangeOut = S['ChangeOut'];
export type ClassesOut = S['ClassesOut'];
export type ApiTrafficClass = S['TrafficClass'];
export type ClassIn = S['ClassIn'];
export type ClassPatch = S['ClassPatch'];
export type BypassIn = S['BypassIn'];
export type BypassOut = S['BypassOut'];
export type BypassListOut = S['BypassListOut'];
export type BodInputs = S['BodInputs'];
export type Derived = S['Derived'];
export type Tuning = S['Tuning'];
export type BodProfileIn = S['BodProfileIn'];
export type BodProfileOut = S['BodProfileOut'];
export type VersionSummary = S['VersionSummary'];
export type VersionOut = S['VersionOut'];
export type VersionList = S['VersionList'];
export type DiffEntry = S['DiffEntry'];
export type DiffOut = S['DiffOut'];
export type ApplyOut = S['ApplyOut'];
export type RollbackOut = S['RollbackOut'];
export type ValidateOut = S['ValidateOut'];
export type RunningOut = S['RunningOut'];
export type UserCreated = S['UserCreated'];
export type HealthOut = S['HealthOut'];
export type FleetStatus = S['FleetStatusOut'];
export type FleetMember = S['FleetMemberOut'];
export type RoutingReport = S['RoutingReport'];
export type BgpNeighbor = S['BgpNeighbor'];
export type SeriesOut = S['SeriesOut'];
export type AuditPage = S['AuditPage'];
export type AuditOut = S['AuditOut'];
export type FlowPage = S['FlowPage'];
export type RestoreOut = S['RestoreOut'];
export type SystemVersions = S['VersionsOut'];
export type TlsStatus = S['TlsOut'];
export type TlsCertificate = S['TlsCertificateOut'];
export type TokenOut = S['TokenOut'];
export type TokenCreate = S['TokenCreate'];
export type TokenCreated = S['TokenCreated'];
// The gateway's control-protocol types, generated from its Rust types (gateway/schema/*.schema.json) via the
// API's models and its OpenAPI.
export type GatewayConfig = S['GatewayConfig'];
export type TrafficClass = S['TrafficClass'];
export type ClassMatch = S['Match'];
export type ClassAction = S['Action'];
export type CongestionControl = S['CongestionControl'];
export type DnsConfig = S['Dns'];
export type Flow = S['Flow'];
export type FlowPath = S['FlowPath'];
export type Relay = S['Relay'];
export type SatelliteLeg = S['SatelliteLeg'];
export type CcReason = S['CcReason'];
export type SatelliteStats = S['SatelliteStatsOut'];
/** The live stream's one event (`event: flows`). */
export type FlowsEvent = S['FlowsEvent'];
export type CacheRequests = S['CacheRequests'];
export type Site = S['Site'];
export type TcpInfo = S['TcpInfo'];
export type GatewayHealth = S['Health'];
export type HyblaStatus = S['HyblaStatus'];
export type CacheStats = S['CacheStats'];
export type DnsReport = S['DnsReport'];
export type ProbeResult = S['ProbeResult'];
export type NetInterface = S['NetInterface'];
export type PreviewOut = S['PreviewOut'];
export type SitesOut = S['SitesOut'];
export type SiteNow = S['SiteNow'];
export type TopTalkersOut = S['TopTalkersOut'];
export type BypassCountsOut = S['BypassCountsOut'];
/** A query parameter of an API operation, as its OpenAPI has it (never restated here). */
type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;
export type Metric = NonNullable<QueryOf<'stats_series_api_v1_stats_series_get'>['metric']>;
/** What a config preview diffs against. */
export type PreviewAgainst = NonNullable<QueryOf<'preview_config_api_v1_config_preview_post'>['against']>;
/** What the top talkers are ranked by. */
export type TalkersBy = NonNullable<QueryOf<'top_talkers_api_v1_stats_top_talkers_get'>['by']>;

/** The closed-flow history's filters (the list and its CSV export take the same): the API's query, paging aside. */
export type FlowHistoryFilter = {
  [K in Exclude<keyof QueryOf<'flow_history_api_v1_flows_history_get'>, 'limit' | 'offset'>]?: NonNullable<QueryOf<'flow_history_api_v1_flows_history_get'>[K]>;
};

/** The CSV export's URL for these filters (a plain link: the browser downloads it with the session cookie). */
export function flowHistoryCsvUrl(filter: FlowHistoryFilter): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) if (v !== undefined && v !== '') q.set(k, String(v));
  const qs = q.toString();
  return `/api/v1/flows/history.csv${qs ? `?${qs}` : ''}`;
}

/** The query of an edit made against what the gateway runs, previewed or made. */
function onRunning(preview: boolean): { base: 'running'; preview?: boolean } {
  return preview ? { base: 'running', preview } : { base: 'running' };
}

/** Login is an unsafe request too: make sure a CSRF cookie exists first. */
async function ensureCsrf(): Promise<void> {
  if (!csrfToken()) await unwrap(api.GET('/api/v1/auth/csrf'));
}

export const endpoints = {
  // auth
  me: () => unwrap(api.GET('/api/v1/auth/me')),
  login: async (username: string, password: string) => {
    await ensureCsrf();
    return unwrap(api.POST('/api/v1/auth/login', { body: { username, password } }));
  },
  logout: () => unwrap(api.POST('/api/v1/auth/logout')),
  changePassword: (current_password: string, new_password: string) =>
    unwrap(api.POST('/api/v1/auth/change-password', { body: { current_password, new_password } })),

  // policy
  classes: () => unwrap(api.GET('/api/v1/policy/classes', { params: { query: { base: 'running' } } })),
  // The dashboard's edits start from what the gateway runs (base=running; docs/webui.md); `preview` stores nothing.
  createClass: (body: ClassIn, preview = false) => unwrap(api.POST('/api/v1/policy/classes', { body, params: { query: onRunning(preview) } })),
  updateClass: (name: string, body: ClassPatch, preview = false) =>
    unwrap(api.PATCH('/api/v1/policy/classes/{name}', { params: { path: { name }, query: onRunning(preview) }, body })),
  deleteClass: (name: string, preview = false) =>
    unwrap(api.DELETE('/api/v1/policy/classes/{name}', { params: { path: { name }, query: onRunning(preview) } })),
  bypass: () => unwrap(api.GET('/api/v1/policy/bypass', { params: { query: { base: 'running' } } })),
  createBypass: (body: BypassIn, preview = false) => unwrap(api.POST('/api/v1/policy/bypass', { body, params: { query: onRunning(preview) } })),
  deleteBypass: (name: string, force = false, preview = false) =>
    unwrap(api.DELETE('/api/v1/policy/bypass/{name}', { params: { path: { name }, query: { ...onRunning(preview), ...(force ? { force } : {}) } } })),
  restoreBuiltins: (preview = false) => unwrap(api.POST('/api/v1/policy/bypass/restore-builtins', { params: { query: onRunning(preview) } })),

  // BoD
  bodDerive: (body: BodProfileIn) => unwrap(api.POST('/api/v1/bod/derive', { body, params: { query: { against: 'running' } } })),
  bodProfiles: () => unwrap(api.GET('/api/v1/bod/profiles')),
  bodCreate: (body: BodProfileIn) => unwrap(api.POST('/api/v1/bod/profiles', { body })),
  bodUpdate: (profile_id: number, body: BodProfileIn) => unwrap(api.PUT('/api/v1/bod/profiles/{profile_id}', { params: { path: { profile_id } }, body })),
  bodApply: (profile_id: number, comment = '', confirm = false, preview = false) =>
    unwrap(
      api.POST('/api/v1/bod/profiles/{profile_id}/apply-to-config', { params: { path: { profile_id }, query: onRunning(preview) }, body: { comment, confirm } }),
    ),

  // config versions
  desiredConfig: () => unwrap(api.GET('/api/v1/config')),
  previewConfig: (config: GatewayConfig, against: PreviewAgainst = 'desired') =>
    unwrap(api.POST('/api/v1/config/preview', { body: { config, comment: '' }, params: { query: { against } } })),
  putConfig: (config: GatewayConfig, comment: string) => unwrap(api.PUT('/api/v1/config', { body: { config, comment } })),
  running: () => unwrap(api.GET('/api/v1/config/running')),
  versions: (limit = 100, offset = 0) => unwrap(api.GET('/api/v1/versions', { params: { query: { limit, offset } } })),
  version: (version_id: number) => unwrap(api.GET('/api/v1/versions/{version_id}', { params: { path: { version_id } } })),
  diff: (a: number, b: number) => unwrap(api.GET('/api/v1/versions/diff', { params: { query: { a, b } } })),
  validateVersion: (version_id: number) => unwrap(api.POST('/api/v1/versions/{version_id}/validate', { params: { path: { version_id } } })),
  applyVersion: (version_id: number, comment = '') =>
    unwrap(api.POST('/api/v1/versions/{version_id}/apply', { params: { path: { version_id } }, body: { comment } })),
  rollback: (version_id: number) => unwrap(api.POST('/api/v1/versions/{version_id}/rollback', { params: { path: { version_id } } })),

  // users
  users: () => unwrap(api.GET('/api/v1/users')),
  createUser: (username: string, role: Role) => unwrap(api.POST('/api/v1/users', { body: { username, role } })),
  updateUser: (user_id: number, patch: Partial<S['UserUpdate']>) =>
    unwrap(api.PATCH('/api/v1/users/{user_id}', { params: { path: { user_id } }, body: { reset_password: false, ...patch } })),
  deleteUser: (user_id: number) => unwrap(api.DELETE('/api/v1/users/{user_id}', { params: { path: { user_id } } })),

  // API tokens
  tokens: () => unwrap(api.GET('/api/v1/tokens')),
  createToken: (body: TokenCreate) => unwrap(api.POST('/api/v1/tokens', { body })),
  deleteToken: (token_id: number) => unwrap(api.DELETE('/api/v1/tokens/{token_id}', { params: { path: { token_id } } })),

  // flows, stats, cache, system
  liveFlows: () => unwrap(api.GET('/api/v1/flows')),
  flowHistory: (query: FlowHistoryFilter & { limit?: number; offset?: number }) =>
    unwrap(api.GET('/api/v1/flows/history', { params: { query } })),
  series: (metric: Metric, start?: number, end?: number) => unwrap(api.GET('/api/v1/stats/series', { params: { query: { metric, start, end } } })),
  sites: () => unwrap(api.GET('/api/v1/sites')),
  topTalkers: (by: TalkersBy, start: number, end?: number, limit = 10) =>
    unwrap(api.GET('/api/v1/stats/top-talkers', { params: { query: { by, start, end, limit } } })),
  bypassCounts: () => unwrap(api.GET('/api/v1/stats/bypass')),
  satelliteStats: () => unwrap(api.GET('/api/v1/stats/satellite')),
  cacheStats: () => unwrap(api.GET('/api/v1/cache/stats')) as Promise<Record<string, unknown>>,
  cachePurge: (target: { url: string } | { all: true }) =>
    unwrap(api.POST('/api/v1/cache/purge', { body: 'all' in target ? { all: true } : { all: false, url: target.url } })),
  dnsStats: () => unwrap(api.GET('/api/v1/dns/stats')),
  dnsFlush: (target: { name: string } | { all: true }) =>
    unwrap(api.POST('/api/v1/dns/flush', { body: 'all' in target ? { all: true } : { all: false, name: target.name } })),
  health: () => unwrap(api.GET('/api/v1/health')),
  interfaces: () => unwrap(api.GET('/api/v1/system/interfaces')),
  fleet: () => unwrap(api.GET('/api/v1/fleet')),
  systemVersions: () => unwrap(api.GET('/api/v1/system/versions')),
  audit: (query: { actor?: string; action?: string; limit?: number; offset?: number }) => unwrap(api.GET('/api/v1/audit', { params: { query } })),
  tls: () => unwrap(api.GET('/api/v1/system/tls')),
  uploadTls: (certificate: string, private_key: string) => unwrap(api.PUT('/api/v1/system/tls', { body: { certificate, private_key } })),
  backup: () => unwrap(api.GET('/api/v1/system/backup')) as Promise<Record<string, unknown>>,
  restore: (file: File) => {
    const form = new FormData();
    form.append('file', file);
    return unwrap(
      api.POST('/api/v1/system/restore', {
        body: { file: file.name },
        bodySerializer: () => form,
      }),
    );
  },
};
