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

export interface GatewayConfig {
  schema?: number;
  revision?: string;
  role: 'hub' | 'terminal';
  classes: TrafficClass[];
  bypass: BypassRule[];
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
