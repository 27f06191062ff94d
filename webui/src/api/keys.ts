// Query keys, so that a change invalidates exactly what it affects.
export const keys = {
  classes: ['policy', 'classes'] as const,
  bypass: ['policy', 'bypass'] as const,
  versions: ['versions'] as const,
  version: (id: number) => ['versions', id] as const,
  diff: (a: number, b: number) => ['versions', 'diff', a, b] as const,
  desired: ['config', 'desired'] as const,
  running: ['config', 'running'] as const,
  bodProfiles: ['bod', 'profiles'] as const,
  users: ['users'] as const,
  tokens: ['tokens'] as const,
  audit: (q: unknown) => ['audit', q] as const,
  health: ['health'] as const,
  fleet: ['fleet'] as const,
  tls: ['system', 'tls'] as const,
  interfaces: ['system', 'interfaces'] as const,
  overview: ['overview'] as const,
  cache: ['cache'] as const,
  dns: ['dns'] as const,
  series: (q: unknown) => ['series', q] as const,
  sites: ['sites'] as const,
  topTalkers: (q: unknown) => ['top-talkers', q] as const,
  bypassCounts: ['bypass-counts'] as const,
};

/** Everything a new config version changes. */
export const afterConfigChange = [keys.classes, keys.bypass, keys.versions, keys.desired, keys.running] as const;
