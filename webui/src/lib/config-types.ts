// The desired gateway configuration (docs/control-protocol.md, GatewayConfig).
export type CongestionControl = 'hybla' | 'hybla_ld' | 'cubic' | 'bbr' | 'reno';
export type ClassAction = 'accelerate' | 'cache' | 'bypass';

export interface ClassMatch {
  src: string[];
  dst: string[];
  protocol: 'tcp' | 'udp' | 'any';
  dports: string[];
  sports: string[];
  dscp: number[];
  iifname: string[];
}

export interface TrafficClass {
  name: string;
  priority: number;
  match: ClassMatch;
  action: ClassAction;
  satellite: { congestion_control: CongestionControl | null; buffer_bytes: number; pacing_rate_bps: number };
}

export interface BypassRule {
  name: string;
  builtin: boolean;
  protocol: 'tcp' | 'udp' | 'esp' | 'ah' | 'any';
  cidrs: string[];
  ports: string[];
}

/** The gateway's caching resolver (docs/dns.md): every field has a default. */
export interface DnsConfig {
  enabled?: boolean;
  /** 'addr' or 'addr@port' */
  upstream?: string[];
  intercept?: boolean;
  cache_mb?: number;
  prefetch?: boolean;
  serve_stale?: boolean;
  stale_ttl_s?: number;
  stale_reply_ttl_s?: number;
  stale_client_timeout_ms?: number;
  min_ttl_s?: number;
  max_ttl_s?: number;
  max_negative_ttl_s?: number;
  client_qps_limit?: number;
  probe_timeout_ms?: number;
}

/** QUIC (UDP 443) from the served subnets: forwarded end to end, or refused so browsers use TCP. */
export type QuicPolicy = 'pass' | 'fallback';
/** The gateway's and the API's default (DEFAULT_QUIC in both). */
export const DEFAULT_QUIC: QuicPolicy = 'fallback';

/** The peer path between a terminal and its hub (docs/splitter.md). */
export interface PeerConfig {
  enabled: boolean;
  /** Hub: its peer listener; terminal: the hub's. */
  port: number;
  /** Terminal: the hub's address (an IP literal); empty at a hub. */
  hub: string;
  /** 64 hex digits, shared by both gateways; required when enabled. */
  key: string;
  /** Hub: CIDRs terminals may connect from (empty = any holder of the key). */
  allowed: string[];
  /** Terminal: warm connections each worker keeps ready. */
  pool_size: number;
}

export interface SplitterConfig {
  enabled: boolean;
  tproxy_port: number;
  max_flows: number;
  connect_timeout_ms: number;
  idle_timeout_s: number;
  relay_buffer_bytes: number;
  /** TCP_NODELAY on both legs (false = the kernel's Nagle, for measurements). */
  nodelay: boolean;
}

export interface GatewayConfig {
  schema?: number;
  revision?: string;
  role: 'hub' | 'terminal';
  classes: TrafficClass[];
  bypass: BypassRule[];
  dns?: DnsConfig;
  splitter?: SplitterConfig;
  peer?: PeerConfig;
  quic?: QuicPolicy;
  [key: string]: unknown;
}

export function newTrafficClass(priority: number): TrafficClass {
  return {
    name: '',
    priority,
    match: { src: [], dst: [], protocol: 'tcp', dports: [], sports: [], dscp: [], iifname: [] },
    action: 'accelerate',
    satellite: { congestion_control: null, buffer_bytes: 0, pacing_rate_bps: 0 },
  };
}

interface LooseClass {
  name: string;
  priority: number;
  action: ClassAction;
  match?: Partial<ClassMatch> & { protocol: ClassMatch['protocol'] };
  satellite?: { congestion_control?: CongestionControl | null; buffer_bytes?: number; pacing_rate_bps?: number };
}

/** Fills the defaults the API may omit, so forms always edit complete classes. */
export function normaliseClass(c: LooseClass): TrafficClass {
  const blank = newTrafficClass(c.priority);
  return {
    name: c.name,
    priority: c.priority,
    action: c.action,
    match: { ...blank.match, ...(c.match ?? {}) },
    satellite: { ...blank.satellite, ...(c.satellite ?? {}) },
  };
}
